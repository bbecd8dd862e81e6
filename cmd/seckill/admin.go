package main

import "io"

func runAdmin(args []string, out io.Writer) error { return nil }
