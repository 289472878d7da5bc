package conversations_test

import (
	"testing"

	"github.com/gatehouse/gatehouse/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }
