# tests/cli: bash scripts driving the simstore binary (tests/cli/lib.sh);
# included by tests/CMakeLists.txt.
simstore_cli_test(test_cli_fingerprint fingerprint.sh)
simstore_cli_test(test_cli_distance distance.sh)
simstore_cli_test(test_cli_pairs pairs.sh)
simstore_cli_test(test_cli_version version.sh)
simstore_cli_test(test_cli_sample sample.sh)
simstore_cli_test(test_cli_store store.sh)
simstore_cli_test(test_cli_segments segments.sh)
simstore_cli_test(test_cli_crash crash.sh)
set_tests_properties(test_cli_crash PROPERTIES TIMEOUT 600)
simstore_cli_test(test_cli_concurrency concurrency.sh)
set_tests_properties(test_cli_concurrency PROPERTIES TIMEOUT 600)
simstore_cli_test(test_cli_inspect inspect.sh)
simstore_cli_test(test_cli_verify verify.sh)
# Formats this simstore does not know: refused as such, never as corrupt.
simstore_cli_test(test_cli_formats formats.sh)
simstore_cli_test(test_cli_dump dump.sh)
simstore_cli_test(test_cli_compressed compressed.sh)
simstore_cli_test(test_cli_corpora corpora.sh)
# cmd/stream.c, on gzip and zstd inputs the test makes itself.
simstore_unit_test(test_cli_stream cli/test_stream.c)
target_link_libraries(test_cli_stream PRIVATE simstore_cmdkit)
# The parallel ingest at real sizes; the sanitizer build uses fewer records.
simstore_cli_test(test_cli_ingest ingest.sh)
if(SIMSTORE_SANITIZE)
  set_tests_properties(test_cli_ingest PROPERTIES TIMEOUT 1200
    ENVIRONMENT "SIMSTORE_SOURCE_DIR=${PROJECT_SOURCE_DIR};SIMSTORE_INGEST_N=20000")
else()
  set_tests_properties(test_cli_ingest PROPERTIES TIMEOUT 900)
endif()
simstore_cli_test(test_cli_usability usability.sh)
# cmd/cli.c's text helpers (escaping, plurals, UTF-8, JSON strings).
simstore_unit_test(test_cli_text cli/test_cli_text.c)
target_link_libraries(test_cli_text PRIVATE simstore_cmdkit)
# What a hostile trial run found (issue 10, item 6): build --replace and
# temporary directories, STORE/, full disks (a tmpfs, where mount is
# permitted), failed automatic compactions, immutable files, unwritable
# stdout, queries that follow build --replace, sizes and counts.
simstore_cli_test(test_cli_hostile hostile.sh)
set_tests_properties(test_cli_hostile PROPERTIES TIMEOUT 600)
# cmd/quantity.c alone: counts and sizes (1e9, 2^30, 64MiB) for the command
# and gen_fingerprints.
simstore_unit_test(test_quantity cli/test_quantity.c)
target_link_libraries(test_quantity PRIVATE simstore_quantity)
simstore_cli_test(test_cli_scan scan.sh)
simstore_cli_test(test_cli_dedup dedup.sh)
simstore_cli_test(test_cli_dedup_paragraphs dedup_paragraphs.sh)
# dedup with the rule's band candidates against the brute force of the rule.
simstore_cli_test(test_cli_dedup_bands dedup_bands.sh)
# query --queries in batches: byte-identical to one by one in every mode.
simstore_cli_test(test_cli_batch batch.sh)
# Sharded stores (format/shards.md, issue 16): build --shards, queries
# byte-identical to one store, stats, inspect, verify, damaged manifests.
simstore_cli_test(test_cli_sharded sharded.sh)
set_tests_properties(test_cli_sharded PROPERTIES TIMEOUT 600)
# get and export: documents by id, every live document, the export read back
# by build into a store with the same answers.
simstore_cli_test(test_cli_documents documents.sh)
# Boilerplate (issue 13, item 2): build --boilerplate auto on a generated
# templated corpus, stats, queries, adds, dedup, standard input and pipes.
simstore_cli_test(test_cli_boilerplate boilerplate.sh)
# Sketches and similarities (format/sketch.md) through the command, against
# a brute-force reference over the sketches `fingerprint --sketch` prints.
simstore_cli_test(test_cli_sketch sketch.sh)
set_tests_properties(test_cli_sketch PROPERTIES TIMEOUT 600)

# The paragraph index (format/store.md, "Paragraphs") through the command:
# planted partial copies and edits, output formats, add, delete, compact.
simstore_cli_test(test_cli_paragraphs paragraphs.sh)
# The man pages generated from the --help texts (cmake/man.cmake, when
# help2man is there) and the bash completion (cmd/completion/simstore.bash).
if(TARGET simstore_man)
  simstore_cli_test(test_cli_man man.sh)
  set_tests_properties(test_cli_man PROPERTIES ENVIRONMENT
    "SIMSTORE_SOURCE_DIR=${PROJECT_SOURCE_DIR};SIMSTORE_MAN_DIR=${PROJECT_BINARY_DIR}/man")
endif()
simstore_cli_test(test_cli_completion completion.sh)
simstore_cli_test(test_cli_docfile_store docfile_store.sh)
# A killed server's write-ahead log through every command after it (issue
# 34, defects 1-3): compact and --shrink, add, delete, dedup --add apply it
# first, build --replace refuses, the next serve puts nothing back, stats
# and verify report it, a damaged log is an error that keeps the file.
simstore_cli_test(test_cli_server_log server_log.sh)
