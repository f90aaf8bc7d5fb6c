package httpapi

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

var searchBodies = []string{
	`{"vector":[1,2.5,-3e-2],"k":10}`,
	` { "vector" : [ 0.1 , 0.2 ] , "k" : 3 , "method_parameters" : { "ef_search" : 100 } , "filter" : { "ids" : [ 1 , -2 , 3 ] } , "rescore" : { "oversample_factor" : 2.0 } , "profile" : true } `,
	`{"vector":[1],"filter":{"ids":[]},"profile":false,"rescore":{},"method_parameters":{}}`,
	`{}`,
	`{"vector":[]}`,
	// Declined by the fast parser, decided by encoding/json:
	`{"Vector":[1],"k":1}`,
	`{"vector":[1],"k":1,"k":2}`,
	`{"vector":null}`,
	`{"vector":[1],"k":1.0}`,
	`{"vector":[1],"k":1e1}`,
	`{"vector":[1],"k":99999999999999999999}`,
	`{"vector":[1,"a"]}`,
	`{"vector":[01]}`,
	`{"vector":[1],"extra":1}`,
	`{"vector":[1]} x`,
	`{"vector":[1],"filter":{"ids":[1.5]}}`,
	`{"vector":[1],"method_parameters":{"ef_search":5,"x":1}}`,
	`{"vector":[1],"rescore":{"oversample_factor":1e999}}`,
	`{"vector":[1],"profile":tru}`,
	`{"vect\u006fr":[1]}`,
	`{"vector":[1]`,
	`[1,2]`,
	``,
}

// strict is what decode does with encoding/json.
func strict(b []byte, r *SearchRequest) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(r); err != nil {
		return err
	}
	if d.More() {
		return errTrailing
	}
	return nil
}

var errTrailing = &apiError{400, "x", "trailing data"}

func checkSearchFast(t *testing.T, b []byte) {
	var fast SearchRequest
	if !searchFast(b, &fast) {
		return
	}
	var want SearchRequest
	if err := strict(b, &want); err != nil {
		t.Fatalf("%q: the fast parser accepted what encoding/json rejects: %v", b, err)
	}
	if !reflect.DeepEqual(fast, want) {
		t.Fatalf("%q: fast %+v, encoding/json %+v", b, fast, want)
	}
}

// TestSearchFast: the fast parser takes the usual bodies and gives what
// encoding/json gives; what it declines still decodes (or fails) as before.
func TestSearchFast(t *testing.T) {
	for i, b := range searchBodies {
		var r SearchRequest
		ok := searchFast([]byte(b), &r)
		if want := i < 5; ok != want {
			t.Errorf("%q: fast parser took it: %v, want %v", b, ok, want)
		}
		checkSearchFast(t, []byte(b))
	}
}

// FuzzSearchFast: whatever the fast parser accepts, encoding/json accepts
// with the same result.
//
//	go test -run='^$' -fuzz=FuzzSearchFast -fuzztime=1m ./httpapi
func FuzzSearchFast(f *testing.F) {
	for _, b := range searchBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(checkSearchFast)
}
