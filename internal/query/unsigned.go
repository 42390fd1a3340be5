package query

import (
	"errors"
	"fmt"
	"math/big"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/decimal256"
	"github.com/apache/arrow-go/v18/arrow/memory"
	bindings "github.com/duckdb/duckdb-go-bindings"
)

// DuckDB's Arrow writes a UHUGEINT (0 to 2^128-1) as a decimal(38, 0),
// an int128 holding the number's bits: every value from 2^127 up read as
// a negative number (2^128-1 as -1). The read path widens such a column,
// at the top of the result or inside a list, array, struct, map or union, to a
// decimal256(39, 0) of the number itself.
//
// A HUGEINT (-2^127 to 2^127-1) DuckDB's Arrow writes as a decimal(38, 0)
// too, its int128 the number, and the read path keeps that type (the
// type of sum() of integers: a decimal256 fewer clients read, and
// DuckDB's own Arrow clients see a decimal(38, 0)). But a value of 39
// digits (10^38 up, 2^127-1, -2^127) is past that precision, and a
// client trusting it reads another number (Arrow's own text of 2^127-1
// there is 1.7014118346046923173168730371588410573e+38): such a value
// fails the query (errHugeintPast), wherever in a column the HUGEINT
// lies, found by the same walk; the others pass as they are.

// uhugeintType is the Arrow type a UHUGEINT is read as: every one of its
// 39 digits.
var uhugeintType = &arrow.Decimal256Type{Precision: 39, Scale: 0}

// widening says where a UHUGEINT (to widen) or a HUGEINT (to check) lies
// in a column of DuckDB's: at the column itself (leaf, hugeint), or in
// the children of a nested column by their index (a list's or array's
// element 0; a map's key 0 and value 1; a struct's fields; a union's
// members). Nil: nowhere.
type widening struct {
	leaf     bool // a UHUGEINT, widened to uhugeintType
	hugeint  bool // a HUGEINT, kept, each value checked (hugeintFits)
	widens   bool // a UHUGEINT lies here: the type changes
	children map[int]*widening
}

// wideningOf is where lt holds a UHUGEINT or a HUGEINT, nil for nowhere.
func wideningOf(lt bindings.LogicalType) *widening {
	var kids []bindings.LogicalType
	switch bindings.GetTypeId(lt) {
	case bindings.TypeUHugeInt:
		return &widening{leaf: true, widens: true}
	case bindings.TypeHugeInt:
		return &widening{hugeint: true}
	case bindings.TypeList:
		kids = []bindings.LogicalType{bindings.ListTypeChildType(lt)}
	case bindings.TypeArray:
		kids = []bindings.LogicalType{bindings.ArrayTypeChildType(lt)}
	case bindings.TypeMap:
		kids = []bindings.LogicalType{bindings.MapTypeKeyType(lt), bindings.MapTypeValueType(lt)}
	case bindings.TypeStruct:
		for i := range bindings.StructTypeChildCount(lt) {
			kids = append(kids, bindings.StructTypeChildType(lt, i))
		}
	case bindings.TypeUnion:
		for i := range bindings.UnionTypeMemberCount(lt) {
			kids = append(kids, bindings.UnionTypeMemberType(lt, i))
		}
	default:
		return nil
	}
	var w *widening
	for i := range kids {
		if kw := wideningOf(kids[i]); kw != nil {
			if w == nil {
				w = &widening{children: map[int]*widening{}}
			}
			w.children[i] = kw
			w.widens = w.widens || kw.widens
		}
		bindings.DestroyLogicalType(&kids[i])
	}
	return w
}

// widenedType is dt, DuckDB's Arrow type of a column w says holds a
// UHUGEINT or a HUGEINT, with each UHUGEINT as uhugeintType (a HUGEINT
// as DuckDB's type).
func widenedType(dt arrow.DataType, w *widening) (arrow.DataType, error) {
	if w == nil || !w.widens {
		return dt, nil
	}
	if w.leaf {
		if dt.ID() != arrow.DECIMAL128 {
			return nil, fmt.Errorf("BUG: DuckDB wrote a UHUGEINT as %s", dt)
		}
		return uhugeintType, nil
	}
	child := func(f arrow.Field, i int) (arrow.Field, error) {
		t, err := widenedType(f.Type, w.children[i])
		f.Type = t
		return f, err
	}
	switch t := dt.(type) {
	case *arrow.ListType:
		f, err := child(t.ElemField(), 0)
		return arrow.ListOfField(f), err
	case *arrow.LargeListType:
		f, err := child(t.ElemField(), 0)
		return arrow.LargeListOfField(f), err
	case *arrow.FixedSizeListType:
		f, err := child(t.ElemField(), 0)
		return arrow.FixedSizeListOfField(t.Len(), f), err
	case *arrow.MapType:
		k, err := child(t.KeyField(), 0)
		if err != nil {
			return nil, err
		}
		v, err := child(t.ItemField(), 1)
		m := arrow.MapOfFields(k, v)
		m.KeysSorted = t.KeysSorted
		return m, err
	case *arrow.StructType:
		fields := t.Fields()
		for i := range fields {
			var err error
			if fields[i], err = child(fields[i], i); err != nil {
				return nil, err
			}
		}
		return arrow.StructOf(fields...), nil
	case arrow.UnionType:
		fields := t.Fields()
		for i := range fields {
			var err error
			if fields[i], err = child(fields[i], i); err != nil {
				return nil, err
			}
		}
		if t.Mode() == arrow.DenseMode {
			return arrow.DenseUnionOf(fields, t.TypeCodes()), nil
		}
		return arrow.SparseUnionOf(fields, t.TypeCodes()), nil
	}
	return nil, fmt.Errorf("BUG: DuckDB wrote a nested column holding a UHUGEINT as %s", dt)
}

// two128 is 2^128, added to an int128 read from a UHUGEINT's bits that is
// negative.
var two128 = new(big.Int).Lsh(big.NewInt(1), 128)

// errHugeintPast is a HUGEINT value of 39 digits, past the precision
// of the decimal(38, 0) it is answered as (widenedData); the reader
// names its column.
var errHugeintPast = errors.New("a HUGEINT value of 39 digits (past the decimal(38, 0) Arrow result type); cast it to VARCHAR or DOUBLE")

// hugeintMax and hugeintMin are the widest HUGEINTs of 38 digits,
// 10^38-1 and its negation.
var hugeintMax = decimal128.GetMaxValue(38)
var hugeintMin = hugeintMax.Negate()

// hugeintFits says each valid value of a, DuckDB's decimal(38, 0) of a
// HUGEINT, has at most 38 digits: two comparisons a value, no
// allocation.
func hugeintFits(a *array.Decimal128) bool {
	vals := a.Values()
	if a.NullN() == 0 {
		for _, v := range vals {
			if v.Greater(hugeintMax) || v.Less(hugeintMin) {
				return false
			}
		}
		return true
	}
	for i, v := range vals {
		if (v.Greater(hugeintMax) || v.Less(hugeintMin)) && a.IsValid(i) {
			return false
		}
	}
	return true
}

// widenedData is data, a column of DuckDB's of type DuckDB's Arrow type,
// with each UHUGEINT w finds as the number itself (its type: widenedType
// of data's), or errHugeintPast where a HUGEINT w finds has a value of
// 39 digits. The caller releases it.
func widenedData(mem memory.Allocator, data arrow.ArrayData, dt arrow.DataType, w *widening) (arrow.ArrayData, error) {
	if w == nil {
		data.Retain()
		return data, nil
	}
	if w.hugeint {
		// DuckDB's Arrow writes a HUGEINT as a decimal(38, 0); written
		// otherwise, its type declares no precision to check.
		if dt.ID() == arrow.DECIMAL128 {
			a := array.NewDecimal128Data(data)
			fits := hugeintFits(a)
			a.Release()
			if !fits {
				return nil, errHugeintPast
			}
		}
		data.Retain()
		return data, nil
	}
	if w.leaf {
		a := array.NewDecimal128Data(data)
		defer a.Release()
		b := array.NewDecimal256Builder(mem, uhugeintType)
		defer b.Release()
		b.Reserve(a.Len())
		for i := range a.Len() {
			if a.IsNull(i) {
				b.AppendNull()
				continue
			}
			n := a.Value(i).BigInt()
			if n.Sign() < 0 {
				n.Add(n, two128)
			}
			b.Append(decimal256.FromBigInt(n))
		}
		out := b.NewDecimal256Array()
		defer out.Release()
		out.Data().Retain()
		return out.Data(), nil
	}
	// A nested column keeps its own buffers (validity, offsets) and
	// offset; only the children holding a UHUGEINT are made anew, and
	// one holding a HUGEINT alone is kept as it is, once checked.
	kids := data.Children()
	childTypes := childTypesOf(dt)
	newKids := make([]arrow.ArrayData, len(kids))
	for i, k := range kids {
		kw := w.children[i]
		if _, ok := dt.(*arrow.MapType); ok {
			// A map's one child is its entries, a struct of key and
			// value: the map's widening is the struct's.
			kw = w
		}
		var err error
		if newKids[i], err = widenedData(mem, k, childTypes[i], kw); err != nil {
			return nil, err
		}
		defer newKids[i].Release()
	}
	if !w.widens {
		data.Retain()
		return data, nil
	}
	nt, _ := widenedType(dt, w) // checked for the schema
	return array.NewData(nt, data.Len(), data.Buffers(), newKids, data.NullN(), data.Offset()), nil
}

// childTypesOf are the types of the children of nested type dt's data.
func childTypesOf(dt arrow.DataType) []arrow.DataType {
	switch t := dt.(type) {
	case *arrow.MapType:
		return []arrow.DataType{t.Elem()}
	case arrow.ListLikeType:
		return []arrow.DataType{t.Elem()}
	case *arrow.StructType:
		ts := make([]arrow.DataType, t.NumFields())
		for i, f := range t.Fields() {
			ts[i] = f.Type
		}
		return ts
	case arrow.UnionType:
		var ts []arrow.DataType
		for _, f := range t.Fields() {
			ts = append(ts, f.Type)
		}
		return ts
	}
	return nil
}
