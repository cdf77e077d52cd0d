package budgetbench

import (
	"errors"
	"strings"

	"github.com/tierset/tierset/budget"
)

func isNotReplicated(err error) bool { return errors.Is(err, budget.ErrNotReplicated) }

func contains(s, sub string) bool { return strings.Contains(s, sub) }
