"""Shared by the Python test scripts (tests/browser, tests/outputs): a check that prints what it
verified and raises Failure when it does not hold."""


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)
    print("ok   " + what)
