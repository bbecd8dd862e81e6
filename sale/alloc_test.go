//go:build !race

package sale

// The race detector makes sync.Pool drop items on purpose, so allocation
// counts mean nothing under -race: this file is built without it only
// (make test runs it in its own pass without -race).

import "testing"

// TestSignAndVerifyDoNotAllocate: both run once per order message.
func TestSignAndVerifyDoNotAllocate(t *testing.T) {
	s := mustSigner(t, sigNew)
	m := signedMessage()
	buf := make([]byte, 0, 512)
	wire := s.AppendSigned(nil, &m)
	d, _ := DecodeMessage(wire)
	s.AppendSigned(buf[:0], &m)
	_ = s.Verify(wire, &d)
	if n := testing.AllocsPerRun(200, func() { buf = s.AppendSigned(buf[:0], &m) }); n != 0 {
		t.Errorf("AppendSigned: %v allocations", n)
	}
	if n := testing.AllocsPerRun(200, func() {
		if err := s.Verify(wire, &d); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Verify: %v allocations", n)
	}
}

// TestParseRequestNoDoesNotAllocate: every result read parses one.
func TestParseRequestNoDoesNotAllocate(t *testing.T) {
	rn := "7-7001-385465232614494208"
	var ok bool
	if n := testing.AllocsPerRun(100, func() { _, _, _, ok = ParseRequestNo(rn) }); n != 0 || !ok {
		t.Errorf("ParseRequestNo allocates %v times (read it: %v)", n, ok)
	}
}

// TestKeysDoNotAllocateMoreThanTheirString: the consumer builds a results
// key per SKU of a batch and every poll one; KeysFor's eleven strings are
// not built.
func TestKeysDoNotAllocateMoreThanTheirString(t *testing.T) {
	var k string
	if n := testing.AllocsPerRun(100, func() { k = ResultsKey(7, 7001) }); n > 1 {
		t.Errorf("ResultsKey allocates %v times, want 1 (its string)", n)
	}
	if n := testing.AllocsPerRun(100, func() { k = RateKey(7, 7001, 42) }); n > 1 {
		t.Errorf("RateKey allocates %v times, want 1 (its string)", n)
	}
	_ = k
}
