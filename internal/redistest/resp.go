package redistest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

const maxBulk = 512 << 20 // Redis' own proto-max-bulk-len default

var crlf = []byte("\r\n")

// readLine appends one '\n'-terminated line, terminator included, to buf.
func readLine(r *bufio.Reader, buf []byte) ([]byte, error) {
	for {
		chunk, err := r.ReadSlice('\n')
		buf = append(buf, chunk...)
		if err != bufio.ErrBufferFull {
			return buf, err
		}
	}
}

// readValue appends one complete RESP2/RESP3 value to buf and returns its
// type byte. An attribute ('|') is read together with the value it
// annotates, and the type of that value is returned.
func readValue(r *bufio.Reader, buf []byte) ([]byte, byte, error) {
	start := len(buf)
	buf, err := readLine(r, buf)
	if err != nil {
		return buf, 0, err
	}
	line := buf[start:]
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return buf, 0, fmt.Errorf("redistest: malformed RESP line %q", line)
	}
	typ, arg := line[0], string(line[1:len(line)-2])
	switch typ {
	case '+', '-', ':', '_', ',', '#', '(': // simple types
		return buf, typ, nil
	case '$', '!', '=': // blob string, blob error, verbatim string
		n, err := strconv.Atoi(arg)
		if err != nil || n > maxBulk {
			return buf, typ, fmt.Errorf("redistest: bad RESP length %q", line)
		}
		if n >= 0 {
			buf, err = readN(r, buf, n+2)
		}
		return buf, typ, err
	case '*', '~', '>', '%', '|': // array, set, push, map, attribute
		n, err := strconv.Atoi(arg)
		if err != nil {
			return buf, typ, fmt.Errorf("redistest: bad RESP length %q", line)
		}
		if typ == '%' || typ == '|' {
			n *= 2
		}
		for i := 0; i < n && err == nil; i++ {
			buf, _, err = readValue(r, buf)
		}
		if err != nil || typ != '|' {
			return buf, typ, err
		}
		return readValue(r, buf) // the value the attribute belongs to
	}
	return buf, typ, fmt.Errorf("redistest: unknown RESP type %q", typ)
}

// readN appends exactly n bytes from r to buf.
func readN(r *bufio.Reader, buf []byte, n int) ([]byte, error) {
	start := len(buf)
	buf = slices.Grow(buf, n)[:start+n]
	_, err := io.ReadFull(r, buf[start:])
	return buf, err
}

// readCommand appends one client command to buf: a RESP array of bulk
// strings or an inline command (a line of text).
func readCommand(r *bufio.Reader, buf []byte) ([]byte, error) {
	first, err := r.Peek(1)
	if err != nil {
		return buf, err
	}
	if first[0] == '*' {
		buf, _, err = readValue(r, buf)
		return buf, err
	}
	return readLine(r, buf)
}

// commandName returns the upper-cased name of the command in raw, or "" for
// an empty command, to which Redis sends no reply.
func commandName(raw []byte) string {
	if raw[0] != '*' {
		if f := bytes.Fields(raw); len(f) > 0 {
			return strings.ToUpper(string(f[0]))
		}
		return ""
	}
	_, rest, _ := bytes.Cut(raw, crlf) // skip "*N"
	hdr, rest, ok := bytes.Cut(rest, crlf)
	if !ok || len(hdr) < 2 || hdr[0] != '$' {
		return ""
	}
	n, err := strconv.Atoi(string(hdr[1:]))
	if err != nil || n < 0 || n > len(rest) {
		return ""
	}
	return strings.ToUpper(string(rest[:n]))
}
