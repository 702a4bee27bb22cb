# tests/docs: the document-side layer (included by tests/CMakeLists.txt).
# test_records: the store's LMDB records against format/golden/*-record*.bin.
simstore_unit_test(test_records lmdb/test_records.c)
target_link_libraries(test_records PRIVATE simstore_lmdb simstore_design)
# test_boilerplate_record: the boilerplate record against
# format/golden/boilerplate-record*.bin.
simstore_unit_test(test_boilerplate_record lmdb/test_boilerplate_record.c)
target_link_libraries(test_boilerplate_record PRIVATE simstore_lmdb)
# test_lmdb_meta: the check that a read transaction holds the commit its id
# names (sims_lmdb_meta_holds), on a real data.mdb.
simstore_unit_test(test_lmdb_meta lmdb/test_lmdb_meta.c)
target_link_libraries(test_lmdb_meta PRIVATE simstore_lmdb)
