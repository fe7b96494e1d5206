package eventlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"

	"github.com/vmihailenco/msgpack/v5"

	"demosvc/eventlog/strictjson"
)

// Registry knows every payload type of the log: its event type name, its
// schema versions, the Go type of each version, and the upcasters that turn
// version n into n+1. A stored record is never reinterpreted: it is decoded
// with the Go type of its own version, then upcast step by step to the
// latest version.
type Registry struct {
	types map[string]*eventType
	byGo  map[reflect.Type]schema
}

type eventType struct {
	name     string
	latest   int
	versions map[int]reflect.Type
	fresh    map[int]func() any             // a new zero payload of each version
	upcast   map[int]func(any) (any, error) // from version n to n+1
}

type schema struct {
	name    string
	version int
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{types: map[string]*eventType{}, byGo: map[reflect.Type]schema{}}
}

// ErrUnknownType reports an event type or version the registry does not know.
var ErrUnknownType = errors.New("unknown event type")

// Validator is what every payload type implements, so that no type can be
// registered without it: Validate checks a payload's values by the rules
// the service writes them with, which is how an imported log is held to
// what the service itself could have written.
type Validator interface {
	Validate() error
}

// Register declares that payloads of type T are event name at version. A Go
// type belongs to one (name, version) only, and *T must be a Validator.
// Versions of a name must be registered in order from 1, each after the
// first with an upcaster (see RegisterUpcast). Register panics on misuse:
// registration is static.
func Register[T any, PT interface {
	*T
	Validator
}](r *Registry, name string, version int) {
	t := reflect.TypeFor[T]()
	if _, dup := r.byGo[t]; dup {
		panic(fmt.Sprintf("eventlog: %v registered twice", t))
	}
	et := r.types[name]
	if et == nil {
		et = &eventType{name: name, versions: map[int]reflect.Type{}, fresh: map[int]func() any{}, upcast: map[int]func(any) (any, error){}}
		r.types[name] = et
	}
	if version != et.latest+1 {
		panic(fmt.Sprintf("eventlog: %s version %d registered after version %d", name, version, et.latest))
	}
	if version > 1 && et.upcast[version-1] == nil {
		panic(fmt.Sprintf("eventlog: %s version %d needs an upcaster from %d", name, version, version-1))
	}
	et.versions[version] = t
	et.fresh[version] = func() any { return new(T) }
	et.latest = version
	r.byGo[t] = schema{name: name, version: version}
}

// RegisterUpcast declares how a payload of version n (type From) becomes
// version n+1 (type To). Call it before registering version n+1.
func RegisterUpcast[From, To any](r *Registry, name string, from int, f func(From) To) {
	et := r.types[name]
	if et == nil || et.versions[from] != reflect.TypeFor[From]() {
		panic(fmt.Sprintf("eventlog: upcaster for %s from version %d: that version is not registered as %v", name, from, reflect.TypeFor[From]()))
	}
	et.upcast[from] = func(v any) (any, error) {
		p, ok := v.(*From)
		if !ok {
			return nil, fmt.Errorf("upcasting %s v%d: got %T", name, from, v)
		}
		out := f(*p)
		return &out, nil
	}
}

// Schema returns the event type name and version of payload, which must be
// a registered type or a pointer to one.
func (r *Registry) Schema(payload any) (name string, version int, err error) {
	t := reflect.TypeOf(payload)
	if t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	s, ok := r.byGo[t]
	if !ok {
		return "", 0, fmt.Errorf("%w: payload type %v is not registered", ErrUnknownType, t)
	}
	return s.name, s.version, nil
}

// Types returns the registered event type names, sorted.
func (r *Registry) Types() []string {
	out := make([]string, 0, len(r.types))
	for name := range r.types {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Known reports whether name is a registered event type.
func (r *Registry) Known(name string) bool { return r.types[name] != nil }

func (r *Registry) goType(name string, version int) (reflect.Type, error) {
	et := r.types[name]
	if et == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownType, name)
	}
	t := et.versions[version]
	if t == nil {
		return nil, fmt.Errorf("%w: %q has no version %d (latest is %d)", ErrUnknownType, name, version, et.latest)
	}
	return t, nil
}

// DecodeStored decodes a record's payload with the Go type of its own
// version, without upcasting. It returns a pointer to that type. A type
// that is a PayloadDecoder decodes itself when the bytes are in the form
// it knows; any other bytes go through DecodeStoredReflective, so the
// result is the same either way.
func (r *Registry) DecodeStored(rec *Record) (any, error) {
	if et := r.types[rec.Type]; et != nil {
		if fresh := et.fresh[rec.Version]; fresh != nil {
			if v, ok := fresh().(PayloadDecoder); ok {
				pr := PayloadReader{r: reader{b: rec.Payload}}
				if v.DecodePayload(&pr) && pr.End() {
					return v, nil
				}
			}
		}
	}
	return r.DecodeStoredReflective(rec)
}

// DecodeStoredReflective is DecodeStored through msgpack's reflection
// alone: what every payload type without its own decoder takes, and what
// any payload a PayloadDecoder does not know falls back to.
func (r *Registry) DecodeStoredReflective(rec *Record) (any, error) {
	t, err := r.goType(rec.Type, rec.Version)
	if err != nil {
		return nil, err
	}
	v := reflect.New(t)
	dec := msgpack.GetDecoder()
	defer msgpack.PutDecoder(dec)
	dec.Reset(bytes.NewReader(rec.Payload))
	dec.DisallowUnknownFields(true)
	dec.SetCustomStructTag("json")
	if err := dec.Decode(v.Interface()); err != nil {
		return nil, fmt.Errorf("%w: seq %d: payload of %s v%d: %v", ErrCorrupt, rec.Seq, rec.Type, rec.Version, err)
	}
	return v.Interface(), nil
}

// Decode decodes a record's payload and upcasts it to the latest version of
// its type. It returns a pointer to the latest version's Go type, which is a
// Validator.
func (r *Registry) Decode(rec *Record) (any, error) {
	v, err := r.DecodeStored(rec)
	if err != nil {
		return nil, err
	}
	et := r.types[rec.Type]
	for ver := rec.Version; ver < et.latest; ver++ {
		if v, err = et.upcast[ver](v); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// Encode encodes payload (a registered type or pointer to one) as msgpack
// and returns its schema.
func (r *Registry) Encode(payload any) (name string, version int, data []byte, err error) {
	name, version, err = r.Schema(payload)
	if err != nil {
		return "", 0, nil, err
	}
	if enc, ok := payload.(PayloadEncoder); ok {
		return name, version, enc.AppendPayload(make([]byte, 0, 128)), nil
	}
	data, err = MarshalPayloadReflective(payload)
	return name, version, data, err
}

// PayloadFromJSON decodes the JSON data of an exported or hand-written
// record into the Go type of (name, version), rejecting unknown fields and
// trailing data, and returns it encoded as msgpack.
func (r *Registry) PayloadFromJSON(name string, version int, data json.RawMessage) ([]byte, error) {
	v, err := r.New(name, version)
	if err != nil {
		return nil, err
	}
	if err := strictjson.DecodeObject(data, v); err != nil {
		return nil, fmt.Errorf("data of %s v%d: %w", name, version, err)
	}
	return MarshalPayloadReflective(v)
}

// New returns a pointer to a new zero payload of (name, version).
func (r *Registry) New(name string, version int) (any, error) {
	t, err := r.goType(name, version)
	if err != nil {
		return nil, err
	}
	return reflect.New(t).Interface(), nil
}

// Latest returns the newest version registered for name, or 0.
func (r *Registry) Latest(name string) int {
	if et := r.types[name]; et != nil {
		return et.latest
	}
	return 0
}

// MarshalPayloadReflective encodes a payload through msgpack's
// reflection: what Encode writes for every type without its own encoder,
// and what a PayloadEncoder's bytes are held equal to.
func MarshalPayloadReflective(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	enc.Reset(&buf)
	enc.UseCompactInts(true)
	enc.SetCustomStructTag("json")
	enc.SetSortMapKeys(true) // re-encoding an import must give the same bytes
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
