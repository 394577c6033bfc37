//go:build ignore

// Command gen writes table.go from instance-types.csv. Run it with
// `go generate ./limits` after editing the CSV.
package main

import (
	"log"
	"os"

	"github.com/vpcnet/vpcnet/limits/internal/gen"
)

func main() {
	src, err := os.ReadFile("instance-types.csv")
	if err != nil {
		log.Fatal(err)
	}
	out, err := gen.Generate(src)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("table.go", out, 0o644); err != nil {
		log.Fatal(err)
	}
}
