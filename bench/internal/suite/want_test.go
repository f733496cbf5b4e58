package suite

import "testing"

func TestWantLeavesOptInScenariosOutOfTheDefault(t *testing.T) {
	all := Config{}
	if !all.want(RenewMany) || all.want(RenewScale) {
		t.Errorf("default: renew-many %v, renew-scale %v; want true, false", all.want(RenewMany), all.want(RenewScale))
	}
	named := Config{Scenarios: []string{RenewScale}}
	if !named.want(RenewScale) || named.want(RenewMany) {
		t.Errorf("--scenarios renew-scale: renew-scale %v, renew-many %v; want true, false", named.want(RenewScale), named.want(RenewMany))
	}
}
