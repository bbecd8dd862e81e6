package chaos

import (
	"testing"

	"seckill/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
