package chaos

import (
	"slices"
	"syscall"
	"testing"
	"time"
)

// TestGenuineMessagesDeadLettered: mid-sale the consumer is redeployed
// with the wrong order-signing key (a botched rotation: the engine signs
// with chaos1, this consumer knows only chaos0), so for 4s every genuine
// message is dead-lettered as signed with an unknown key; then it is
// redeployed right. The buyers notice nothing (the consumer is not on
// their path). Every acknowledged ticket whose message was dead-lettered
// must still end — FAIL RELEASED by the orphan sweeper within its grace,
// its story naming the dead letter, its unit back on sale — and every
// other one SUCCESS; the partition never stops.
func TestGenuineMessagesDeadLettered(t *testing.T) {
	sc := newScenario(t, Options{})
	s := sc.s
	env := slices.Clone(s.Consumer.Env)
	redeploy := func(extra ...string) error {
		s.Consumer.kill(syscall.SIGTERM)
		s.Consumer.Env = append(slices.Clone(env), extra...)
		return s.restart(s.Consumer, nil)
	}
	sc.withFault(faultPlan{
		Name: "consumer redeployed with the wrong order-signing key for 4s", At: 2 * time.Second,
		Inject: func() error {
			return redeploy("SECKILL_ORDER_SIGNING_KEYS=chaos0:a-key-the-engine-never-had-0123456789")
		},
		HealAt: 6 * time.Second,
		Heal:   func() error { return redeploy() },
		During: healthy, Settle: time.Second,
		DeadLetters: &deadLettering{},
	})
	if n := s.Consumer.Count("undecodable or unverified order message dead-lettered"); n == 0 {
		t.Error("no genuine message was dead-lettered: the fault tested nothing")
	}
}
