// Package merge holds memrec's merges: streams merged by time, and the
// runs of a multi-node job merged into one run on one clock.
//
//   - bytime.go: ByTime merges time-ordered streams (Iterator; storage.Iter
//     is one) into one, equal times in the order of the inputs. The CSV
//     export, the analysis (the allocator series of a GPU's processes) and
//     the merge of runs read their series this way; the JSON Lines export
//     has its own merge of blocks (formats/jsonl), cheaper where every
//     series shares its ticks.
//   - runs.go: Runs joins the runs of one job, each recorded on its own
//     node into its own file, into one run whose GPUs are numbered across
//     the nodes and whose times are on the first node's clock, the offsets
//     found on the step marks the nodes share. It reads the inputs through
//     storage's iterators and writes through a storage.Loader: one
//     transaction, the whole run or nothing.
//
// The package reads and writes the store only through storage's public
// API; storage does not import it.
package merge
