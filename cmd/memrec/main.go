// Command memrec records the GPU memory of a training run and explains it.
package main

import "os"

func main() {
	os.Exit(execute(os.Args[1:], defaultIO()))
}
