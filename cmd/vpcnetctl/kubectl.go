package main

import (
	"context"
	"io"
)

func runKubectl(ctx context.Context, args []string, stdout, stderr io.Writer) int { return 0 }
