def piecewise(x):
    y = __lg.Undefined('y')

    def __lg_get_state():
        return (y,)

    def __lg_set_state(__lg_vars):
        nonlocal y
        y, = __lg_vars

    def __lg_if_body():
        nonlocal y
        y = np.sin(__lg.list_arg(x))

    def __lg_else_body():
        nonlocal y

        def __lg_get_state_1():
            return (y,)

        def __lg_set_state_1(__lg_vars_1):
            nonlocal y
            y, = __lg_vars_1

        def __lg_if_body_1():
            nonlocal y
            y = x * x

        def __lg_else_body_1():
            nonlocal y
            y = 0.0
        __lg.if_stmt(x > -1, __lg_if_body_1, __lg_else_body_1, __lg_get_state_1, __lg_set_state_1, ('y',), 1, __lg_src.loc(9, 4))
    __lg.if_stmt(x > 0, __lg_if_body, __lg_else_body, __lg_get_state, __lg_set_state, ('y',), 1, __lg_src.loc(7, 4))
    return y
