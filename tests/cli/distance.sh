#!/usr/bin/env bash
# distance.sh: `simstore distance HEX HEX`.
. "$(dirname "$0")/lib.sh"

run distance ffffffffffffffff 0000000000000000
expect_status 0; expect_out "64"; expect_err_empty
run distance 5cc1c8efc0c9b905 5cc1c8efc0c9b905
expect_out "0"
run distance 5CC1C8EFC0C9B905 5cc1c8efc0c9b904
expect_status 0; expect_out "1"
run distance 0000000000000001 8000000000000000
expect_out "2"
run distance --help
expect_status 0; expect_out_has "Usage: simstore distance HEX HEX"
run distance --bogus 0 0
expect_status 2; expect_err_has "simstore distance: unknown option '--bogus'"
run distance 0000000000000000
expect_status 2; expect_err_has "expected two fingerprints, got 1 argument"
run distance 0000000000000000 0000000000000000 0000000000000000
expect_status 2; expect_err_has "got 3 arguments"
for bad in 000000000000000 00000000000000000 00000000000000zz 0x00000000000000 "" " 000000000000000"; do
    run distance "$bad" 0000000000000000
    expect_status 2; expect_err_has "is not a fingerprint (16 hex digits expected)"
    expect_err_has "Try 'simstore distance --help'."
done
finish
