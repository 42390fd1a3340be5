package flightsql

import (
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// A duration parameter is bound as the duration sent or refused: one
// past time.Duration's ±292 years (1e10 seconds, about 317 years)
// wrapped around in the multiplication by its unit and was bound as
// another interval, negative here, with no error.
func TestDurationParameterPastItsRangeIsRefused(t *testing.T) {
	for _, unit := range []arrow.TimeUnit{arrow.Second, arrow.Millisecond} {
		b := array.NewDurationBuilder(memory.DefaultAllocator, &arrow.DurationType{Unit: unit})
		n := arrow.Duration(10_000_000_000) // seconds
		if unit == arrow.Millisecond {
			n *= 1000
		}
		b.Append(n)
		b.Append(-n)
		a := b.NewArray()
		b.Release()
		for i := range 2 {
			got, err := value(a, i)
			if err != nil {
				continue // refused: never another value
			}
			d, ok := got.(time.Duration)
			want := 1e10 // seconds
			if i == 1 {
				want = -want
			}
			if !ok || d.Seconds() != want {
				t.Errorf("duration[%s] %d: bound as %v (%v s), want it refused or %v s", unit, a.(*array.Duration).Value(i), got, d.Seconds(), want)
			}
		}
		a.Release()
	}
}
