package trace

import (
	"bytes"
	"fmt"
)

// LooksLike says what the first bytes of a file that is not what a reader
// wants show ("it looks like an ELF executable", "the file is empty", "it
// starts with ..."), for the reader's error. Readers peek these bytes and
// refuse before reading the rest: a 2 GB file of zeros (sparse) is refused
// at once, not after reading it. The trace loader and compare share it.
func LooksLike(head []byte) string {
	if len(head) == 0 {
		return "the file is empty"
	}
	for _, m := range []struct {
		magic, what string
	}{
		{"\x7fELF", "an ELF executable or library"},
		{"PK\x03\x04", "a zip archive (unzip it first)"},
		{"\x28\xb5\x2f\xfd", "zstd-compressed data (decompress it first: zstd -d)"},
		{"BZh", "bzip2-compressed data (decompress it first: bunzip2)"},
		{"\xfd7zXZ", "xz-compressed data (decompress it first: xz -d)"},
		{"\x80\x02", "a Python pickle"},
	} {
		if bytes.HasPrefix(head, []byte(m.magic)) {
			return "it looks like " + m.what
		}
	}
	return fmt.Sprintf("it starts with %q", head)
}

// JSONStart is what may come before a JSON document's first '{' or '[':
// white space and a UTF-8 byte order mark.
const JSONStart = " \t\r\n\xef\xbb\xbf"
