package httpapi

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestUnknownFieldAgreesWithEncodingJSON: unknownField names a refused key
// exactly when encoding/json's own decode (unknown fields disallowed)
// fails for that key, and names the key it names, whatever other error
// comes before or after it: type errors, this package's unmarshalers
// (which encoding/json reports first wherever they are), keys in another
// case, nested objects, maps of objects.
func TestUnknownFieldAgreesWithEncodingJSON(t *testing.T) {
	bodies := []string{
		`{"foo":1}`, `{"path":"x","foo":1}`, `{"foo":1,"mode":5}`, `{"mode":5,"foo":1}`,
		`{"rerank":{"vectors_path":"x","bar":1}}`, `{"RERANK":{"vectors_path":"x","bar":1}}`, `{"PATH":"x","foo":1}`,
		`{"rerank":[{"bar":1}],"baz":1}`, `{"rerank":5,"bar":1}`, `{"fo\u00e9":1}`, `{"a\"b":1}`, `{"foo":1} x`,
		`{"vector":[1,2],"k":1,"foo":1}`, `{"foo":1,"vector":"x"}`, `{"vector":"x","foo":1}`, `{"foo":1,"k":"x"}`,
		`{"k":"x","foo":1}`, `{"foo":1,"k":null}`, `{"zz":1,"k":1.5}`, `{"vector":[1],"filter":{"ids":[1],"bar":2}}`,
		`{"vector":[1],"filter":{"bar":2,"ids":"x"}}`, `{"vector":[1],"method_parameters":{"Ef_Search":1,"ef":1}}`,
		`{"vector":[1],"filters":{"i":{"IDS":[1],"x":1}}}`, `{"vector":[1],"filters":{"i":5,"j":{"zz":1}}}`,
		`{"Filter":{"ids":[1],"zz":1},"vector":[1]}`, `{"zz":1,"vectors":"x"}`, `{"vectors":"x","zz":1}`,
		`{"actions":[{"add":{"index":"i","zz":1}}]}`, `{"actions":[{"zz":{}}]}`, `{"zz":1,"index":5}`,
		`{"INDEX":"i","zz":1}`, `{"index":"i"}`, `{}`, `[]`, `null`,
	}
	types := []any{&LoadSpec{}, &SwitchSpec{}, &SearchRequest{}, &MSearchRequest{}, &AliasesRequest{}, &msearchHead{}, &struct{}{}}
	for _, body := range bodies {
		for _, typ := range types {
			fresh := func() any { return reflect.New(reflect.TypeOf(typ).Elem()).Interface() }
			d := json.NewDecoder(strings.NewReader(body))
			d.DisallowUnknownFields()
			err := d.Decode(fresh())
			if err == nil {
				continue
			}
			want, refused := strings.CutPrefix(err.Error(), "json: unknown field ")
			key, ok := unknownField([]byte(body), fresh(), err)
			if assert.Equal(t, refused, ok, "%s into %T: %v", body, typ, err) && ok {
				assert.Equal(t, want, fmt.Sprintf("%q", key), "%s into %T", body, typ)
			}
		}
	}
}
