// The request log's live part: polls for rows newer than the last one shown, with the page's
// filters, and puts them on top. The page works without it (reload).
(function () {
  const table = document.getElementById("log");
  const body = document.getElementById("rows");
  let last = table.dataset.last || "0";
  async function poll() {
    const q = new URLSearchParams(window.location.search);
    q.set("since", last);
    try {
      const res = await fetch("log/rows?" + q.toString(), { credentials: "same-origin" });
      if (res.ok) {
        last = res.headers.get("X-Last-Seq") || last;
        const html = await res.text();
        if (html.trim() !== "") {
          body.insertAdjacentHTML("afterbegin", html);
          // As many rows as the page shows: an open page stays fast however long it runs.
          const max = parseInt(table.dataset.max || "0", 10);
          while (max > 0 && body.rows.length > max) {
            body.deleteRow(-1);
          }
        }
      }
    } catch (e) {
      // The cloud restarted or went away: try again at the next tick.
    }
    setTimeout(poll, 1000);
  }
  setTimeout(poll, 1000);
})();
