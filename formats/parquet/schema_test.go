package parquet

import (
	"bytes"
	"testing"

	pq "github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
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
