package testenv

import "regexp"

// OrderNo is the number of the order made from ticket requestNo by the rule
// the README documents ("Numbers"): the letter O followed by the requestNo.
// It is written here apart from sale.OrderNo on purpose, so that the tests
// take their expected order numbers from the documentation, not from the
// code they test.
func OrderNo(requestNo string) string { return "O" + requestNo }

// OrderNoPattern matches the number of an order made from a ticket an
// engine issued: O and the ticket number "<activity>-<sku>-<id>", three
// positive decimals of at most 19 digits each.
var OrderNoPattern = regexp.MustCompile(`^O[1-9][0-9]{0,18}-[1-9][0-9]{0,18}-[1-9][0-9]{0,18}$`)
