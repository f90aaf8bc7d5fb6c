package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
)

// KeyError is a JSON key CheckKeys refuses: one given twice in an object,
// or one that names a field only in another case (encoding/json would
// have taken "K" for "k", and the last of two "k" silently).
type KeyError struct {
	Key       string
	Duplicate bool
	In        string // the enclosing field, dotted ("" at the top level)
}

func (e *KeyError) Error() string {
	what := "unknown field"
	if e.Duplicate {
		what = "duplicate field"
	}
	if e.In != "" {
		return fmt.Sprintf("%s %q in %s", what, e.Key, e.In)
	}
	return fmt.Sprintf("%s %q", what, e.Key)
}

// CheckKeys refuses, in the JSON text b, a key given twice in one object
// (at any depth) and a key that matches a field of v's type (a pointer to
// what b decodes into) only case-insensitively. Run it on text that has
// decoded into v without error: a syntax error stops the walk and is
// reported as none. Keys of maps are names, not fields: only their
// repetition is refused.
func CheckKeys(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	err := checkValue(d, t, "", keysWalk)
	if _, ok := err.(*KeyError); ok {
		return err
	}
	return nil
}

// NullError is a null where an object or a list is required: encoding/json
// would take it as the field left out, OpenSearch refuses it.
type NullError struct {
	Field string // dotted, [i] for a list's element; "" for the body
	Type  reflect.Type
}

func (e *NullError) Error() string {
	if e.Field == "" {
		return "the body must be a JSON object, not null"
	}
	return fmt.Sprintf("%s must be %s, not null", e.Field, jsonKind(e.Type))
}

// checkBody is CheckKeys for a request body, which also refuses a null
// where an object or a list is required (a *NullError).
func checkBody(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch err := checkValue(d, t, "", bodyWalk).(type) {
	case *KeyError, *NullError:
		return err
	}
	return nil
}

// unknownField is the key encoding/json refused with err, decoding b into
// v with unknown fields disallowed, or false for another refusal.
// encoding/json words that one as text alone; it is told by types here:
// err is no type, syntax or end-of-input error; a key of b names no field
// in any case (the first in the order encoding/json reads them, which is
// the one it reports); and b decoded again without the refusal fails with
// a type error or not at all (a failure of one of this package's
// unmarshalers is reported before any unknown key). What the refused
// decode made in v is dropped before b decodes again.
func unknownField(b []byte, v any, err error) (string, bool) {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	if errors.As(err, &te) || errors.As(err, &se) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "", false
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return "", false
	}
	ke, ok := checkValue(json.NewDecoder(bytes.NewReader(b)), rv.Type(), "", unknownWalk).(*KeyError)
	if !ok {
		return "", false
	}
	rv.Elem().SetZero()
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(v); err != nil && !errors.As(err, &te) {
		return "", false
	}
	return ke.Key, true
}

// walk is what checkValue refuses.
type walk int

const (
	keysWalk    walk = iota // a key given twice, or naming a field in another case (CheckKeys)
	bodyWalk                // those, and a null where nullRefused (checkBody)
	unknownWalk             // only a key that names no field in any case (unknownField)
)

// nullRefused reports whether a JSON null is refused for a value of t:
// objects and lists, but not types that read a null themselves
// (IntParam: "k is null").
func nullRefused(t reflect.Type) bool {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return false
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map:
		return true
	case reflect.Struct:
		return !reflect.PointerTo(t).Implements(unmarshaler)
	}
	return false
}

func isList(t reflect.Type) bool { return t.Kind() == reflect.Slice || t.Kind() == reflect.Array }

// nullProbe takes any JSON value and says whether it was null, without a
// copy or a token per element.
type nullProbe bool

func (p *nullProbe) UnmarshalJSON(b []byte) error {
	*p = string(b) == "null"
	return nil
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// checkValue walks the next value of d as decoding into t (nil: a type
// that takes any value, its keys only checked for repetition), refusing
// what w says. In a bodyWalk, a null where nullRefused is a *NullError.
func checkValue(d *json.Decoder, t reflect.Type, in string, w walk) error {
	nulls := w == bodyWalk
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	// A list of lists is walked a list at a time when nulls are refused,
	// so a null list among them is seen.
	if t != nil && noObjects(t) && !(nulls && isList(t) && isList(t.Elem())) {
		// Numbers, strings, arrays of them (by kind: this package's
		// unmarshalers of that kind take no object either): skipped whole,
		// without a token per element (an _msearch's vectors). What holds
		// an object there failed to decode already.
		var null nullProbe
		if err := d.Decode(&null); err != nil {
			return err
		}
		if nulls && bool(null) && nullRefused(t) {
			return &NullError{Field: in, Type: t}
		}
		return nil
	}
	refuseNull, want := nulls && nullRefused(t), t
	if t != nil && (reflect.PointerTo(t).Implements(unmarshaler) || t.Kind() == reflect.Interface) {
		t = nil // decodes itself: no field names to compare
	}
	tok, err := d.Token()
	if err != nil {
		return err
	}
	if tok == nil && refuseNull {
		return &NullError{Field: in, Type: want}
	}
	switch tok {
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		return checkList(d, elem, in, w)
	case json.Delim('{'):
		return checkObject(d, t, in, w)
	}
	return nil
}

// checkList walks the rest of a list (its '[' read) of elements decoding
// into elem, as checkValue does.
func checkList(d *json.Decoder, elem reflect.Type, in string, w walk) error {
	for i := 0; d.More(); i++ {
		err := checkValue(d, elem, in, w)
		if ne, ok := err.(*NullError); ok && ne.Field == in {
			ne.Field = fmt.Sprintf("%s[%d]", in, i)
		}
		if err != nil {
			return err
		}
	}
	_, err := d.Token()
	return err
}

// checkObject walks the rest of an object (its '{' read) decoding into t,
// as checkValue does: a key given twice, or naming a field of struct t
// only in another case, is a *KeyError; in an unknownWalk, only a key
// naming no field of struct t in any case is (encoding/json takes one in
// another case for its field).
func checkObject(d *json.Decoder, t reflect.Type, in string, w walk) error {
	var fields map[string]reflect.Type
	var val reflect.Type // a map's values
	if t != nil && t.Kind() == reflect.Struct {
		fields = fieldsOf(t)
	} else if t != nil && t.Kind() == reflect.Map {
		val = t.Elem()
	}
	seen := map[string]bool{}
	for d.More() {
		kt, err := d.Token()
		if err != nil {
			return err
		}
		key, _ := kt.(string)
		if seen[key] && w != unknownWalk {
			return &KeyError{Key: key, Duplicate: true, In: in}
		}
		seen[key] = true
		ft, sub := val, in
		if fields != nil {
			var ok bool
			if ft, ok = fields[key]; !ok {
				for name, nt := range fields {
					if strings.EqualFold(name, key) {
						if w != unknownWalk {
							return &KeyError{Key: key, In: in}
						}
						ft, ok = nt, true
						break
					}
				}
				if !ok && w == unknownWalk {
					return &KeyError{Key: key, In: in}
				}
			}
			sub = key
			if in != "" {
				sub = in + "." + key
			}
		} else if t != nil && t.Kind() == reflect.Map {
			sub = fmt.Sprintf("%s[%q]", in, key)
		}
		if err := checkValue(d, ft, sub, w); err != nil {
			return err
		}
	}
	_, err := d.Token()
	return err
}

// noObjects reports whether a value of t can hold no JSON object.
func noObjects(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64, reflect.String:
		return true
	case reflect.Slice, reflect.Array:
		return noObjects(t.Elem())
	}
	return false
}

var fieldCache sync.Map // reflect.Type → map[string]reflect.Type

// fieldsOf is the JSON names of struct t's fields (those of untagged
// embedded structs included, as encoding/json promotes them) and their
// types.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	var add func(t reflect.Type)
	add = func(t reflect.Type) {
		var embedded []reflect.Type
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			ft := f.Type
			if f.Anonymous && name == "" {
				for ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct {
					embedded = append(embedded, ft)
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if _, ok := m[name]; !ok {
				m[name] = f.Type
			}
		}
		for _, e := range embedded { // the outer struct's names win
			add(e)
		}
	}
	add(t)
	fieldCache.Store(t, m)
	return m
}

// decodeErrorText says what encoding/json refused in a request body in a
// client's words: the field, the JSON type it needs and the one it got,
// or where the text stops being JSON; never a Go type.
func decodeErrorText(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		got := gotText(te.Value)
		if te.Field == "" {
			if te.Type != nil && te.Type.Kind() == reflect.Struct {
				return "the body must be a JSON object, got " + got
			}
			return "the body must be " + jsonKind(te.Type) + ", got " + got
		}
		return fmt.Sprintf("%s must be %s, got %s", te.Field, jsonKind(te.Type), got)
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d: %s", se.Offset, se.Error())
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "invalid JSON: the body ends inside a value"
	}
	return err.Error() // this package's unmarshalers speak for themselves
}

// gotText is an UnmarshalTypeError's Value with its article: "a string",
// "an array", "a number 2.5".
func gotText(v string) string {
	switch {
	case v == "bool":
		return "a boolean"
	case strings.HasPrefix(v, "array"), strings.HasPrefix(v, "object"):
		return "an " + v
	}
	return "a " + v // string, number, number 2.5
}

// listErrorText is decodeErrorText for a list of T (a vector, a filter's
// ids) that decodes itself, where encoding/json cannot name the field:
// name is the field, elem what one element is called.
func listErrorText[T any](err error, name, elem string) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) || te.Type == nil {
		return fmt.Errorf("%s: %s", name, decodeErrorText(err))
	}
	if te.Type.Kind() == reflect.Slice { // the whole value is no list
		return fmt.Errorf("%s must be %s, got %s", name, jsonKind(reflect.TypeFor[[]T]()), gotText(te.Value))
	}
	if n, ok := strings.CutPrefix(te.Value, "number "); ok { // a number T cannot hold
		return fmt.Errorf("%s: %s %s is not %s in range", name, elem, n, jsonKind(te.Type))
	}
	return fmt.Errorf("%s: each %s must be %s, got %s", name, elem, jsonKind(te.Type), gotText(te.Value))
}

// jsonKind names, with its article, the JSON value a Go type decodes from.
func jsonKind(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "a JSON value"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		switch e := t.Elem(); {
		case isList(e):
			return "a list of lists"
		case e.Kind() >= reflect.Int && e.Kind() <= reflect.Uint64:
			return "a list of integers"
		case e.Kind() == reflect.Float32 || e.Kind() == reflect.Float64:
			return "a list of numbers"
		}
		return "a list"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "a JSON value"
}
