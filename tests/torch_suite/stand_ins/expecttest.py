"""A minimal stand-in for the `expecttest` package, for the torch suite runner only.

torch.testing._internal.common_utils imports expecttest for its TestCase
base class and the ACCEPT flag; Debian 12 does not package it. The runner
puts this folder at the end of sys.path, so a real expecttest wins when it
is installed. The distributed tests never call the inline-expectation
asserts; they are implemented here anyway (as plain comparisons, without
rewriting the caller's source as the real package can), so a test that does
call them checks what it means to check.
"""
import textwrap
import unittest

ACCEPT = False  # the real package's --accept mode; never set by the runner


def _normalize(expect, skip):
    del skip  # the real package uses it to find the literal in the caller's source
    return textwrap.dedent(expect).strip("\n")


class TestCase(unittest.TestCase):
    longMessage = True

    def assertExpectedInline(self, actual, expect, skip=0):  # noqa: N802 - the real package's name
        self.assertIsInstance(actual, str)
        self.assertMultiLineEqual(_normalize(expect, skip), actual.strip("\n"))

    def assertExpectedRaisesInline(self, exc_type, callable, expect, *args, **kwargs):  # noqa: N802,A002
        try:
            callable(*args, **kwargs)
        except exc_type as e:
            self.assertExpectedInline(str(e), expect, skip=1)
            return
        self.fail(f"Did not raise when expected to: {exc_type.__name__}")

    def assertExpectedRaises(self, exc_type, callable, *args, **kwargs):  # noqa: N802,A002
        with self.assertRaises(exc_type):
            callable(*args, **kwargs)


__all__ = ["TestCase", "ACCEPT"]
