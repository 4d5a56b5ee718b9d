package workloadidentity

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/utils/ptr"
)

// The proxy's images come from upstream's variables unless a flag is given; a flag wins even
// when empty (it turns the sidecar off); one image without the other is refused.
func TestSetProxyImages(t *testing.T) {
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	both := map[string]string{ProxyImageEnv: "reg/proxy:v1", ProxyInitImageEnv: "reg/proxy-init:v1"}
	for name, tc := range map[string]struct {
		env               map[string]string
		image, initImage  *string
		wantImg, wantInit string
		wantErr           string
	}{
		"none":                {},
		"env":                 {env: both, wantImg: "reg/proxy:v1", wantInit: "reg/proxy-init:v1"},
		"flags":               {image: ptr.To("f/proxy:2"), initImage: ptr.To("f/init:2"), wantImg: "f/proxy:2", wantInit: "f/init:2"},
		"flags win":           {env: both, image: ptr.To("f/proxy:2"), initImage: ptr.To("f/init:2"), wantImg: "f/proxy:2", wantInit: "f/init:2"},
		"one flag, one env":   {env: both, image: ptr.To("f/proxy:2"), wantImg: "f/proxy:2", wantInit: "reg/proxy-init:v1"},
		"empty flags win":     {env: both, image: ptr.To(""), initImage: ptr.To("")},
		"spaces trimmed":      {env: map[string]string{ProxyImageEnv: " a:1 ", ProxyInitImageEnv: "b:1\n"}, wantImg: "a:1", wantInit: "b:1"},
		"image alone (env)":   {env: map[string]string{ProxyImageEnv: "a:1"}, wantErr: "set both --proxy-image (PROXY_IMAGE) and --proxy-init-image (PROXY_INIT_IMAGE)"},
		"init alone (flag)":   {initImage: ptr.To("b:1"), wantErr: "set both --proxy-image"},
		"empty flag vs env":   {env: both, image: ptr.To(""), wantErr: "set both"},
		"not a reference":     {image: ptr.To("a b"), initImage: ptr.To("c"), wantErr: `--proxy-image (PROXY_IMAGE) "a b" is not an image reference`},
		"not a reference (2)": {env: map[string]string{ProxyImageEnv: "a", ProxyInitImageEnv: "b\tc"}, wantErr: "--proxy-init-image (PROXY_INIT_IMAGE)"},
	} {
		t.Run(name, func(t *testing.T) {
			c := Config{TenantID: "t"}
			err := c.SetProxyImages(env(tc.env), tc.image, tc.initImage)
			if tc.wantErr != "" {
				if !errors.Is(err, ErrProxyImages) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want ErrProxyImages with %q", err, tc.wantErr)
				}
				if c.ProxyImage != "" || c.ProxyInitImage != "" {
					t.Errorf("images set on error: %+v", c)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.ProxyImage != tc.wantImg || c.ProxyInitImage != tc.wantInit || c.TenantID != "t" {
				t.Errorf("config = %+v, want images %q and %q", c, tc.wantImg, tc.wantInit)
			}
		})
	}
}
