package main

import (
	"context"
	"fmt"

	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/formats/parquet"
	"github.com/memrec/memrec/storage"
)

// exportParquet writes the run's tables into the folder o.output, in its
// host=/run= partition (package parquet). The runs of one export share a
// parquet.Dataset, which refuses to write two runs into one partition.
func exportParquet(ctx context.Context, o *exportOptions, db *storage.DB, r storage.Run) error {
	if o.parquet == nil {
		o.parquet = parquet.NewDataset(o.output)
	}
	st, err := o.parquet.Export(ctx, db, r)
	if err != nil {
		return fmt.Errorf("export %s: %w", r.Name, err)
	}
	var rows int64
	for _, n := range st.Rows {
		rows += n
	}
	fmt.Fprintf(o.io.Err, "wrote %s: %d tables, %d rows, %s in %s\n", r.Name, len(st.Files), rows, units.FormatBytes(st.Bytes), o.output)
	return nil
}
