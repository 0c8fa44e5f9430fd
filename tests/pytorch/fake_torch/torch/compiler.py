compiling = [False]


def is_compiling():
    return compiling[0]
