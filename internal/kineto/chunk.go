package kineto

import "bytes"

// endState is how parsing a chunk of the traceEvents array ended.
type endState uint8

const (
	// endClean: the chunk ended between two events.
	endClean endState = iota
	// endClosed: the array's closing ']' was found at pos.
	endClosed
	// endIncomplete: the event starting at pos did not end inside the chunk.
	endIncomplete
	// endError: a syntax error at pos.
	endError
)

// parseChunk reads the events in b, which must start between two events of
// the traceEvents array (at an event's '{', or before ']').
func parseChunk(b []byte, bt *batch) (endState, int, error) {
	i := 0
	for {
		i = skipSpace(b, i)
		if i >= len(b) {
			return endClean, i, nil
		}
		switch b[i] {
		case ']':
			return endClosed, i, nil
		case ',':
			// Tolerate an empty element (",,") or a leading comma.
			i++
			continue
		case '{':
		default:
			return endError, i, errAt(i, "expected '{' to start an event or ']' to end traceEvents")
		}
		start := i
		bt.eventPos = start
		next, err := parseEvent(b, i, bt)
		if err == errShort {
			return endIncomplete, start, nil
		}
		if err != nil {
			pos := next
			if se, ok := err.(*syntaxError); ok {
				pos = se.pos
			}
			return endError, pos, err
		}
		i = skipSpace(b, next)
		if i >= len(b) {
			return endClean, i, nil
		}
		switch b[i] {
		case ',':
			i++
		case ']':
			return endClosed, i, nil
		default:
			return endError, i, errAt(i, "expected ',' or ']' after an event")
		}
	}
}

// findCut returns the position of the '{' that starts the last event of b
// which is preceded by "}" and "," (with any whitespace): a likely boundary
// between two events. A cut that falls inside a string is caught later: the
// chunk before it then ends with an incomplete event and is re-parsed
// together with the next one. It returns -1 when b holds no such boundary.
func findCut(b []byte) int {
	end := len(b)
	for end > 0 {
		j := bytes.LastIndexByte(b[:end], '{')
		if j <= 0 {
			return -1
		}
		k := j - 1
		for k >= 0 && isSpace(b[k]) {
			k--
		}
		if k >= 0 && b[k] == ',' {
			k--
			for k >= 0 && isSpace(b[k]) {
				k--
			}
			if k >= 0 && b[k] == '}' {
				return j
			}
		}
		end = j
	}
	return -1
}
