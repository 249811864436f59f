package parquet

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/memrec/memrec/storage"
)

// ErrPartitionTaken: two runs of one export map to the same partition
// folder (a case-insensitive file system, or a third-party folder of the
// same name). The export refuses the second rather than replace the first.
var ErrPartitionTaken = errors.New("partition already written by this export")

// ErrNameTooLong: a host or run name escapes to more than a folder name may
// hold. Cutting it would make two names one folder.
var ErrNameTooLong = errors.New("escaped name too long for a folder")

// maxComponent is the longest folder name the common file systems (ext4,
// XFS, APFS, NTFS) and object stores' key parts take, in bytes.
const maxComponent = 255

// hiveDefault is the value Hive and Spark read as null.
const hiveDefault = "__HIVE_DEFAULT_PARTITION__"

// escaped reports whether PartitionValue escapes byte c: Hive's and
// Spark's set (FileUtils.escapePathName, ExternalCatalogUtils.charToEscape),
// with NUL added, which no file name can hold.
func escaped(c byte) bool {
	return c < 0x20 || c == 0x7f || strings.IndexByte(`"#%'*/:=?\{[]^`, c) >= 0
}

// PartitionValue is s as one partition folder's value, escaped the way
// Hive and Spark escape one: each byte of the set above, and each byte of
// s that is not valid UTF-8, becomes %XX (upper-case hex). '%' is in the
// set, so distinct names give distinct values and UnescapePartitionValue
// gives s back; Spark, Hive and DuckDB's hive_partitioning decode it.
// Hive's null marker gets its first byte escaped, so it does not read
// back as null ("" does; no stored run has an empty name).
func PartitionValue(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1, escaped(s[i]), i == 0 && s == hiveDefault:
			fmt.Fprintf(&b, "%%%02X", s[i])
			i++
		default:
			b.WriteString(s[i : i+n])
			i += n
		}
	}
	return b.String()
}

// UnescapePartitionValue reverses PartitionValue.
func UnescapePartitionValue(v string) (string, error) {
	var b []byte
	for i := 0; i < len(v); i++ {
		if v[i] != '%' {
			b = append(b, v[i])
			continue
		}
		if i+2 >= len(v) {
			return "", fmt.Errorf("partition value %q: %% at byte %d without two hex digits", v, i)
		}
		c, err := strconv.ParseUint(v[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("partition value %q: %%%s is not hex", v, v[i+1:i+3])
		}
		b = append(b, byte(c))
		i += 2
	}
	return string(b), nil
}

// Partition is run r's folder inside each table's folder:
// host=H/run=R, H and R the host and run names escaped by PartitionValue.
func Partition(r storage.Run) (string, error) {
	host, run := "host="+PartitionValue(hostOf(r)), "run="+PartitionValue(r.Name)
	for _, c := range []string{host, run} {
		if len(c) > maxComponent {
			return "", fmt.Errorf("run %q: %s… is %d bytes, at most %d: %w", r.Name, c[:32], len(c), maxComponent, ErrNameTooLong)
		}
	}
	return filepath.Join(host, run), nil
}

// A Dataset is one export of runs into one folder. It writes each run's
// partition once: a run that maps to a partition an earlier run of the same
// Dataset wrote is refused with ErrPartitionTaken, naming both. A partition
// from an earlier export (another Dataset) is replaced whole. Not safe for
// concurrent use.
type Dataset struct {
	dir     string
	written map[string]string // partition → run name
	folders []writtenFolder
}

type writtenFolder struct {
	run string
	fi  os.FileInfo
}

// NewDataset returns a Dataset writing into dir (made at the first Export).
func NewDataset(dir string) *Dataset {
	return &Dataset{dir: dir, written: map[string]string{}}
}

// claim refuses part if this Dataset wrote it already, by name or, on a
// file system that folds case or cuts names, as the same folder.
func (d *Dataset) claim(r storage.Run, part string) error {
	if prev, ok := d.written[part]; ok {
		return fmt.Errorf("runs %q and %q both map to %s: %w", prev, r.Name, part, ErrPartitionTaken)
	}
	if fi, err := os.Stat(filepath.Join(d.dir, "runs", part)); err == nil {
		for _, w := range d.folders {
			if os.SameFile(fi, w.fi) {
				return fmt.Errorf("runs %q and %q both map to the folder %s: %w", w.run, r.Name, part, ErrPartitionTaken)
			}
		}
	}
	return nil
}

// done records part as written by run r.
func (d *Dataset) done(r storage.Run, part string) {
	d.written[part] = r.Name
	if fi, err := os.Stat(filepath.Join(d.dir, "runs", part)); err == nil {
		d.folders = append(d.folders, writtenFolder{run: r.Name, fi: fi})
	}
}
