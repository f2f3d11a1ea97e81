package handlers

// The fast path's reader of flat JSON objects (see hotbody.go).

// member is one member of a flat object: a string without escapes (the
// bytes between its quotes) or an integer literal.
type member struct {
	name, value []byte
	str         bool
}

// scanFlat reads data as an object whose members are strings without
// escapes or integer literals without fraction or exponent, at most
// len(out) of them. ok is false for anything else, including valid JSON it
// does not read (escapes, other value types, nesting).
func scanFlat(data []byte, out *[maxHotMembers]member) (n int, ok bool) {
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '{' {
		return 0, false
	}
	i = skipWS(data, i+1)
	if i < len(data) && data[i] == '}' {
		return 0, skipWS(data, i+1) == len(data)
	}
	for {
		if n == len(out) {
			return 0, false
		}
		m := &out[n]
		if m.name, i, ok = plainString(data, i); !ok {
			return 0, false
		}
		i = skipWS(data, i)
		if i >= len(data) || data[i] != ':' {
			return 0, false
		}
		i = skipWS(data, i+1)
		if i >= len(data) {
			return 0, false
		}
		if data[i] == '"' {
			if m.value, i, ok = plainString(data, i); !ok {
				return 0, false
			}
			m.str = true
		} else {
			start := i
			if data[i] == '-' {
				i++
			}
			digits := i
			for i < len(data) && data[i] >= '0' && data[i] <= '9' {
				i++
			}
			if i == digits || i-digits > 1 && data[digits] == '0' {
				return 0, false
			}
			m.value, m.str = data[start:i], false
		}
		n++
		i = skipWS(data, i)
		if i >= len(data) {
			return 0, false
		}
		switch data[i] {
		case ',':
			i = skipWS(data, i+1)
		case '}':
			return n, skipWS(data, i+1) == len(data)
		default:
			return 0, false
		}
	}
}

// plainString reads a JSON string at data[i] that has no escape and no
// control character, and returns its contents and the index after it.
func plainString(data []byte, i int) ([]byte, int, bool) {
	if i >= len(data) || data[i] != '"' {
		return nil, i, false
	}
	for j := i + 1; j < len(data); j++ {
		switch c := data[j]; {
		case c == '"':
			return data[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20:
			return nil, i, false
		}
	}
	return nil, i, false
}

func skipWS(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}
