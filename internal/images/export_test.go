package images

// Untar is the archive unpacker the push uses, for tests that look inside an archive.
var Untar = untar
