package measure

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"sync"
)

// nullFloat is a float64 written as null when it is NaN or ±Inf (which
// encoding/json refuses to write) and read back from null as NaN.
type nullFloat float64

// MarshalJSON implements json.Marshaler.
func (f nullFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, v, 'g', -1, 64), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (f *nullFloat) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		*f = nullFloat(math.NaN())
		return nil
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*f = nullFloat(v)
	return nil
}

// The figure types (Op, Raw, Overhead) are plain structs of float64s, so
// that the code computing them does arithmetic without conversions. Their
// JSON form is a twin struct built once by reflection: the same fields,
// names and tags in the same order, with every float64 a nullFloat. A
// hand-written twin per type would have to be kept in step field by field.

var (
	nullFloatType = reflect.TypeFor[nullFloat]()
	float64Type   = reflect.TypeFor[float64]()
	wireTypes     sync.Map // reflect.Type -> its JSON twin
)

// wireType returns the JSON twin of the struct type t.
func wireType(t reflect.Type) reflect.Type {
	if w, ok := wireTypes.Load(t); ok {
		return w.(reflect.Type)
	}
	fields := make([]reflect.StructField, t.NumField())
	for i := range fields {
		f := t.Field(i)
		if f.Type == float64Type {
			f.Type = nullFloatType
		}
		fields[i] = f
	}
	w, _ := wireTypes.LoadOrStore(t, reflect.StructOf(fields))
	return w.(reflect.Type)
}

// convertFields copies src's fields into dst's, which has the same fields
// with float64 and nullFloat exchanged.
func convertFields(dst, src reflect.Value) {
	for i := range src.NumField() {
		dst.Field(i).Set(src.Field(i).Convert(dst.Field(i).Type()))
	}
}

// marshalFigures writes the struct v with NaN and ±Inf figures as null.
func marshalFigures(v any) ([]byte, error) {
	src := reflect.ValueOf(v)
	w := reflect.New(wireType(src.Type())).Elem()
	convertFields(w, src)
	return json.Marshal(w.Interface())
}

// unmarshalFigures reads b into the struct dst points to; null figures read
// as NaN. A field absent from b keeps dst's value, or with absentNaN is NaN
// (a float64) or zero, so that a figure absent from b can never pass for a
// measured zero. On error dst is unchanged.
func unmarshalFigures(b []byte, dst any, absentNaN bool) error {
	d := reflect.ValueOf(dst).Elem()
	w := reflect.New(wireType(d.Type())).Elem()
	if absentNaN {
		for i := range w.NumField() {
			if f := w.Field(i); f.Type() == nullFloatType {
				f.SetFloat(math.NaN())
			}
		}
	} else {
		convertFields(w, d)
	}
	if err := json.Unmarshal(b, w.Addr().Interface()); err != nil {
		return err
	}
	convertFields(d, w)
	return nil
}
