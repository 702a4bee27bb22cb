# tests/cli: bash scripts driving the simstore binary (tests/cli/lib.sh);
# included by tests/CMakeLists.txt.
simstore_cli_test(test_cli_fingerprint fingerprint.sh)
simstore_cli_test(test_cli_distance distance.sh)
simstore_cli_test(test_cli_pairs pairs.sh)
simstore_cli_test(test_cli_version version.sh)
simstore_cli_test(test_cli_sample sample.sh)
simstore_cli_test(test_cli_store store.sh)
simstore_cli_test(test_cli_segments segments.sh)
