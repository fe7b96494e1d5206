package http

import "demosvc/projections"

// decodeSessionInput decodes the usual body of POST /v1/sessions without
// reflection and reports whether it did: one object of agent_id,
// contact_id and contact (itself an object of name, email and company),
// each given once, each value a string of printable ASCII without an
// escape, with JSON's whitespace around any token. Every string of the
// result is a part of one copy of the body. Any other body (another
// member or type, a null, an escape, a byte outside printable ASCII) is
// left to strictjson, which decides it and words the error: this path
// accepts only bodies strictjson accepts, and decodes them to the same
// value (FuzzSessionInputFastPathAgrees holds it to that).
//
// It exists for speed: the reflective decoder was 1.3 µs of a created
// session's 44 µs of server CPU under wrk, the largest part of the
// handler's own work (perf, 2026-11-26).
func decodeSessionInput(body []byte, in *projections.SessionInput) bool {
	p := plainObject{s: string(body)}
	var out projections.SessionInput
	const agent, contactID, contact = 1, 2, 4
	seen := 0
	read := p.members(func(name string) bool {
		switch name {
		case "agent_id":
			v, ok := p.str()
			out.AgentID = v
			return ok && once(&seen, agent)
		case "contact_id":
			v, ok := p.str()
			out.ContactID = &v
			return ok && once(&seen, contactID)
		case "contact":
			out.Contact = new(projections.Contact)
			return p.contact(out.Contact) && once(&seen, contact)
		}
		return false
	})
	if !read || !p.end() {
		return false
	}
	*in = out
	return true
}

// plainObject reads the plain JSON that decodeSessionInput takes from s,
// one token at a time; i is the next byte. Every method reports false for
// anything else, leaving i wherever it stopped.
type plainObject struct {
	s string
	i int
}

// ws skips JSON whitespace.
func (p *plainObject) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// take skips whitespace, then the byte c if it comes next.
func (p *plainObject) take(c byte) bool {
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// str reads a string of printable ASCII with no escape.
func (p *plainObject) str() (string, bool) {
	if !p.take('"') {
		return "", false
	}
	start := p.i
	for ; p.i < len(p.s); p.i++ {
		switch c := p.s[p.i]; {
		case c == '"':
			p.i++
			return p.s[start : p.i-1], true
		case c < ' ' || c > '~' || c == '\\':
			return "", false
		}
	}
	return "", false
}

// members reads an object, calling member with each name once the colon
// after it is read; member reads the value.
func (p *plainObject) members(member func(name string) bool) bool {
	if !p.take('{') {
		return false
	}
	if p.take('}') {
		return true
	}
	for {
		name, ok := p.str()
		if !ok || !p.take(':') || !member(name) {
			return false
		}
		if p.take('}') {
			return true
		}
		if !p.take(',') {
			return false
		}
	}
}

// contact reads a contact object into c.
func (p *plainObject) contact(c *projections.Contact) bool {
	const name, email, company = 1, 2, 4
	seen := 0
	field := func(bit int, dst *string) bool {
		v, ok := p.str()
		*dst = v
		return ok && once(&seen, bit)
	}
	return p.members(func(n string) bool {
		switch n {
		case "name":
			return field(name, &c.Name)
		case "email":
			return field(email, &c.Email)
		case "company":
			return field(company, &c.Company)
		}
		return false
	})
}

// once marks bit in seen and reports whether it was not marked before: a
// member given twice is left to strictjson, which refuses it.
func once(seen *int, bit int) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

// end reads the whitespace after the object, and nothing else.
func (p *plainObject) end() bool {
	p.ws()
	return p.i == len(p.s)
}
