#!/usr/bin/python3
"""test_package.py: how the Python package `simstore` is put together
(python/simstore/ over its C core, the extension simstore._simstore in
python/_simstore/): the extension is package-private with its state in
the module (a second copy of it has its own types and exceptions, and is
freed once dropped; it imports in a subinterpreter), its types are heap
types, the exceptions the package raises itself and those of the library
are the same classes, results are named tuples that print and pickle as
simstore's, and only PyInit__simstore is exported. Run by ctest
(tests/python/tests.cmake) with PYTHONPATH naming the built package:

    test_package.py [unittest names...]"""
import gc
import importlib.util
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest
import weakref

import simstore
from simstore import _simstore

Py_TPFLAGS_IMMUTABLETYPE = 1 << 8
Py_TPFLAGS_HEAPTYPE = 1 << 9
ERRORS = ["Error", "NotFoundError", "CorruptError", "VersionError", "NoMemoryError",
          "IOFailedError", "FullError", "InvalidArgumentError", "BusyError", "RangeError",
          "ExistsError", "ReadOnlyError"]


def second_copy():
    """Another module object of the extension, made and run as an import
    would (multi-phase initialisation: a new module, its own state)."""
    spec = importlib.util.spec_from_file_location("simstore._simstore", _simstore.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="simstore-pkg-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.tmp, name)


class TestLayout(Base):
    def test_package_and_extension(self):
        package = os.path.dirname(simstore.__file__)
        self.assertEqual(os.path.basename(simstore.__file__), "__init__.py")
        self.assertEqual(_simstore.__name__, "simstore._simstore")
        self.assertEqual(os.path.dirname(_simstore.__file__), package)
        self.assertTrue(os.path.basename(_simstore.__file__).startswith("_simstore."))
        self.assertIs(simstore._simstore, _simstore)
        self.assertEqual(_simstore.__version__, simstore.__version__)

    def test_heap_types(self):
        core = _simstore.Store
        self.assertTrue(core.__flags__ & Py_TPFLAGS_HEAPTYPE)
        self.assertTrue(core.__flags__ & Py_TPFLAGS_IMMUTABLETYPE)
        self.assertEqual(core.__module__, "simstore._simstore")
        with self.assertRaises(TypeError):
            core.k = 3  # immutable
        with self.assertRaises(TypeError):
            type("Sub", (core,), {})  # final
        for name in ERRORS:
            self.assertTrue(getattr(_simstore, name).__flags__ & Py_TPFLAGS_HEAPTYPE, name)
        # The public Store is the package's class over the core.
        self.assertIsNot(simstore.Store, core)
        with self.assertRaises(TypeError):
            simstore.Store()

    def test_exports_only_init(self):
        nm = shutil.which("nm")
        if nm is None:
            self.skipTest("no nm")
        out = subprocess.run([nm, "-D", "--defined-only", _simstore.__file__],
                             capture_output=True, text=True, check=True).stdout
        self.assertEqual([line.split()[-1] for line in out.splitlines()], ["PyInit__simstore"])


class TestErrors(Base):
    def test_same_classes(self):
        for name in ERRORS:
            cls = getattr(simstore, name)
            self.assertIs(cls, getattr(_simstore, name), name)
            self.assertEqual(f"{cls.__module__}.{cls.__name__}", f"simstore.{name}")
            self.assertTrue(issubclass(cls, simstore.Error))
        self.assertEqual(simstore.RecoveryWarning.__module__, "simstore")
        self.assertTrue(issubclass(simstore.RecoveryWarning, UserWarning))

    def test_raised_by_package_and_core(self):
        # The package's own check (RangeError) and the library's (the core's).
        with simstore.Store.build(self.path("s"), [("a", 1)], sketch="none") as s:
            with self.assertRaises(simstore.RangeError) as cm:
                s.query(0, k=8)
            self.assertEqual(cm.exception.code, -9)
        with self.assertRaises(simstore.NotFoundError) as cm:
            simstore.Store.open(self.path("missing"))
        self.assertEqual(cm.exception.code, -1)
        with self.assertRaises(simstore.InvalidArgumentError) as cm:
            simstore.fingerprint("x", version=1, weights="log")  # the library refuses
        self.assertEqual(cm.exception.code, -7)
        self.assertIsInstance(_simstore.error(-8, "m"), simstore.BusyError)
        self.assertEqual(_simstore.error(-8, "m").code, -8)
        self.assertIs(type(_simstore.error(-99, "m")), simstore.Error)


class TestModuleState(Base):
    def test_second_copy_has_its_own_state(self):
        other = second_copy()
        self.assertIsNot(other, _simstore)
        for name in ERRORS + ["Store"]:
            self.assertIsNot(getattr(other, name), getattr(_simstore, name), name)
        # Its functions raise its own classes, and its stores are its own.
        with self.assertRaises(other.InvalidArgumentError) as cm:
            other.fingerprint("x", {"version": 1, "weighting": 2})
        self.assertNotIsInstance(cm.exception, simstore.Error)
        with self.assertRaises(other.NotFoundError):
            other.Store(self.path("missing"), False, True, True, False)
        simstore.Store.build(self.path("s"), [("a", 1)], sketch="none").close()
        core = other.Store(self.path("s"), True, True, True, False)
        self.assertIs(type(core), other.Store)
        with self.assertRaises(other.BusyError):
            other.Store(self.path("s"), True, True, True, False)
        try:
            with self.assertRaises(simstore.BusyError):
                simstore.Store.open(self.path("s"), write=True)
        finally:
            core.close()
        self.assertEqual(other.fingerprint("a b c", {}), simstore.fingerprint("a b c"))

    def test_dropped_copy_is_freed(self):
        # The module, its types and exceptions hold each other: its
        # traverse and clear let the collector free them.
        other = second_copy()
        store_type = weakref.ref(other.Store)
        error = weakref.ref(other.Error)
        del other
        gc.collect()
        self.assertIsNone(store_type())
        self.assertIsNone(error())

    def test_subinterpreter(self):
        try:
            import _xxsubinterpreters as interpreters
        except ImportError:
            self.skipTest("no _xxsubinterpreters")
        out = self.path("out.txt")
        script = f"""if True:
            import simstore
            with simstore.Store.build({self.path('sub.store')!r}, [("a", "one two three four"),
                                      ("b", "one two three four")]) as s:
                ids = [m.id for m in s.query("one two three four")]
            try:
                s.query(0)
            except ValueError as e:
                closed = str(e)
            try:
                simstore.Store.open({self.path('none')!r})
            except simstore.NotFoundError as e:
                code = e.code
            with open({out!r}, "w") as f:
                f.write(repr((simstore.fingerprint("a b c d"), ids, closed, code)))
        """
        interp = interpreters.create()
        try:
            interpreters.run_string(interp, script)
        finally:
            interpreters.destroy(interp)
        with open(out) as f:
            got = f.read()
        self.assertEqual(got, repr((simstore.fingerprint("a b c d"), ["a", "b"],
                                    "operation on a closed store", -1)))


class TestResults(Base):
    def test_named_tuples(self):
        docs = [("a", "one two three four", {"n": 1}), ("b", "one two three four")]
        with simstore.Store.build(self.path("s"), docs, paragraph_min_words=1) as s:
            m = s.query("one two three four", meta=True)[0]
            self.assertIsInstance(m, simstore.Match)
            self.assertIsInstance(m, tuple)
            self.assertEqual(m.meta, {"n": 1})
            self.assertTrue(repr(m).startswith("simstore.Match(id='a', fp="), repr(m))
            self.assertEqual(pickle.loads(pickle.dumps(m)), m)
            self.assertIs(type(pickle.loads(pickle.dumps(m))), simstore.Match)
            doc = s.get("a")
            self.assertEqual((type(doc), doc.meta), (simstore.Document, {"n": 1}))
            self.assertEqual(type(next(s.pairs(k=0))), simstore.Pair)
            self.assertEqual(type(next(s.clusters(k=0))), simstore.ClusterMember)
            self.assertEqual(type(s.query_paragraphs("one two three four")[0]),
                             simstore.ParagraphMatch)
        self.assertEqual(type(simstore.paragraphs("a b")[0]), simstore.Paragraph)
        for cls in (simstore.Match, simstore.Pair, simstore.ClusterMember, simstore.Document,
                    simstore.Paragraph, simstore.ParagraphMatch, simstore.Recovery):
            self.assertEqual(cls.__module__, "simstore")
            self.assertTrue(cls.__doc__)
            for field in cls._fields:
                self.assertTrue(getattr(cls, field).__doc__, f"{cls.__name__}.{field}")

    def test_key_function_from_another_thread(self):
        # The key function runs in the thread that called clusters(), which
        # takes back the GIL it released for the clustering.
        docs = [(f"d{i}", "one two three four five six", {"score": i}) for i in range(5)]
        with simstore.Store.build(self.path("s"), docs) as s:
            got, seen = [], set()

            def key(meta):
                seen.add(threading.get_ident())
                return meta["score"]

            def work():
                got.extend(m.id for m in s.clusters(keep="max_key", key=key) if m.kept)

            t = threading.Thread(target=work)
            t.start()
            t.join()
            self.assertEqual(got, ["d4"])
            self.assertEqual(seen, {t.ident})


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v", *sys.argv[1:]])
