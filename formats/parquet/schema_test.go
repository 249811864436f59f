package parquet

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
	"testing"

	pq "github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"

	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

// writeOne writes one zero row of T as Export does and returns the file's
// schema elements.
func writeOne[T any](t *testing.T) []format.SchemaElement {
	t.Helper()
	var buf bytes.Buffer
	w := pq.NewGenericWriter[T](&buf, pq.Compression(&pq.Zstd))
	var zero T
	if _, err := w.Write([]T{zero}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := pq.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	return f.Metadata().Schema
}

// TestSchemaForSpark: every column of every table has a type Spark 3.x
// and 4.x read (as do Hive, Trino and BigQuery): timestamps are
// INT64 TIMESTAMP(MICROS, adjusted to UTC) with the TIMESTAMP_MICROS
// converted type older readers use; strings are BYTE_ARRAY with the
// STRING logical type and UTF8 converted type; integers are signed; no
// INT96 and no NANOS. Each table has the string columns host_name and
// run_name, and the device and allocator tables epoch and step.
func TestSchemaForSpark(t *testing.T) {
	schemas := map[string][]format.SchemaElement{
		"device": writeOne[Device](t), "process": writeOne[Process](t), "allocator": writeOne[Allocator](t),
		"marks": writeOne[Mark](t), "sites": writeOne[Site](t), "budget": writeOne[Budget](t),
		"runs": writeOne[RunRow](t), "gpus": writeOne[GPURow](t),
	}
	if len(schemas) != len(Tables) {
		t.Fatalf("%d tables checked, %d exported", len(schemas), len(Tables))
	}
	for table, els := range schemas {
		cols := map[string]format.SchemaElement{}
		for _, el := range els[1:] { // [0] is the root
			cols[el.Name] = el
			typ, _ := el.Type.Get()
			conv, hasConv := el.ConvertedType.Get()
			switch lt := el.LogicalType.Value.(type) {
			case *format.TimestampType:
				if _, micros := lt.Unit.Value.(*format.MicroSeconds); !micros || !lt.IsAdjustedToUTC || typ != format.Int64 ||
					!hasConv || conv != deprecated.TimestampMicros {
					t.Errorf("%s.%s: %s, %v, converted %v: want INT64 TIMESTAMP(MICROS, UTC), TIMESTAMP_MICROS", table, el.Name, lt, typ, conv)
				}
			case *format.IntType:
				if !lt.IsSigned {
					t.Errorf("%s.%s: %s: unsigned", table, el.Name, lt)
				}
			case *format.StringType:
				if typ != format.ByteArray || !hasConv || conv != deprecated.UTF8 {
					t.Errorf("%s.%s: STRING on %v, converted %v: want BYTE_ARRAY, UTF8", table, el.Name, typ, conv)
				}
			case nil:
				if typ == format.ByteArray || typ == format.Int96 || typ == format.FixedLenByteArray {
					t.Errorf("%s.%s: %v without a logical type", table, el.Name, typ)
				}
			default:
				t.Errorf("%s.%s: logical type %s", table, el.Name, lt)
			}
		}
		want := []string{"host_name", "run_name"}
		if table == "device" || table == "allocator" {
			want = append(want, "time", "epoch", "step")
		}
		for _, c := range want {
			if _, ok := cols[c]; !ok {
				t.Errorf("%s: no column %s", table, c)
			}
		}
		if st, ok := cols["time"]; ok {
			if _, ts := st.LogicalType.Value.(*format.TimestampType); !ts {
				t.Errorf("%s.time is not a timestamp", table)
			}
		}
	}
}

// TestAllocatorFollowsWireTable: the allocator table's figure columns are
// wire.TorchFields' rows (not keys, not optional) in the table's order,
// between rank and epoch, and each takes its own field of the sample.
func TestAllocatorFollowsWireTable(t *testing.T) {
	var want []string
	for _, f := range wire.TorchFields {
		if !f.Key && !f.Optional {
			want = append(want, f.ColumnName())
		}
	}
	var cols []string
	for _, el := range writeOne[Allocator](t)[1:] {
		cols = append(cols, el.Name)
	}
	from, to := slices.Index(cols, "rank")+1, slices.Index(cols, "epoch")
	if from == 0 || to < from || !slices.Equal(cols[from:to], want) {
		t.Errorf("allocator columns %v: want %v between rank and epoch", cols, want)
	}

	// A sample whose every field differs: each column holds its own.
	var s storage.TorchSample
	for i, f := range wire.TorchFields {
		f.Set(&s, int64(1000+i))
	}
	row := Allocator{}
	v := reflect.ValueOf(&row).Elem()
	for _, f := range allocatorFigures {
		v.Field(f.index).SetInt(f.get(s))
	}
	for i, f := range wire.TorchFields {
		if f.Key || f.Optional {
			continue
		}
		for j := range v.NumField() {
			if name, _, _ := strings.Cut(v.Type().Field(j).Tag.Get("parquet"), ","); name == f.ColumnName() && v.Field(j).Int() != int64(1000+i) {
				t.Errorf("%s = %d, want %d", name, v.Field(j).Int(), 1000+i)
			}
		}
	}
}

// TestAllocatorRefusesUnknownFigure: a figure added to the table without
// its column is an error of Export, naming it, not a silent gap.
func TestAllocatorRefusesUnknownFigure(t *testing.T) {
	fs := append(slices.Clone(wire.TorchFields), wire.Field[storage.TorchSample]{Name: "throwaway_counts", Stat: "num_throwaway",
		Get: func(storage.TorchSample) int64 { return 1 }, Set: func(*storage.TorchSample, int64) {}})
	if _, err := figuresOf(reflect.TypeFor[Allocator](), fs); err == nil || !strings.Contains(err.Error(), "throwaway_counts") {
		t.Errorf("figuresOf with an unknown figure: %v, want an error naming throwaway_counts", err)
	}
	if errFigures != nil {
		t.Errorf("the allocator table lacks a figure: %v", errFigures)
	}
}
