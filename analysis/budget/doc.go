// Package budget splits one GPU's memory at its highest step peak into
// parts that add up to device used, and says what would lower it.
//
// The parts stack from the allocator outwards: the watched model's
// parameters, gradients, optimizer state and buffers (memrec.watch), the
// activations and temporaries (the step's peak allocated less those), the
// allocator's inactive split blocks and free cache (reserved less
// allocated), other PyTorch processes, and what PyTorch does not see
// (device used less all it reserved). budget.go holds the split and a
// fatal OOM's (New, NewOOM); advice.go the remedies (Advise), one function
// each in the table remedies, each saving a figure where it is arithmetic
// and a range where it depends on the model, with the batch that would
// then fit by compare --by's rule (batchArithmetic).
//
// Everything here works on values passed in (Input, AdviceInput): package
// analysis reads the store and fills them. Values are plain data;
// functions are safe for concurrent use on distinct budgets.
package budget
