def recurrence(x, n):
    s = 0.0
    __lg_continue = __lg.Undefined('__lg_continue')
    i = __lg.Undefined('i')

    def __lg_get_state():
        return (s,)

    def __lg_set_state(__lg_vars):
        nonlocal s
        s, = __lg_vars

    def __lg_loop_body(__lg_itr):
        nonlocal __lg_continue, i, s
        i = __lg_itr
        __lg_continue = False

        def __lg_get_state_1():
            return (s, __lg_continue)

        def __lg_set_state_1(__lg_vars_1):
            nonlocal s, __lg_continue
            s, __lg_continue = __lg_vars_1

        def __lg_if_body():
            nonlocal __lg_continue, s
            __lg_continue = True

        def __lg_else_body():
            nonlocal __lg_continue, s
            s = 0.9 * s + np.sin(__lg.item(x, i)) * __lg.item(x, i - 1)
        __lg.if_stmt(__lg.item(x, i) < 0, __lg_if_body, __lg_else_body, __lg_get_state_1, __lg_set_state_1, ('s', '__lg_continue'), 1, __lg_src.loc(19, 8))
    __lg.for_stmt(__lg.range_(1, n), None, __lg_loop_body, __lg_get_state, __lg_set_state, ('s',), __lg_src.loc(18, 4))
    return s
