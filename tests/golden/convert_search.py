def search(x, tol):
    __lg_do_return = False
    __lg_retval = None
    i = 0

    def __lg_get_state():
        return (__lg_do_return, __lg_retval, i, x)

    def __lg_set_state(__lg_vars):
        nonlocal __lg_do_return, __lg_retval, i, x
        __lg_do_return, __lg_retval, i, x = __lg_vars

    def __lg_loop_test():
        return __lg.and_(lambda: __lg.not_(__lg_do_return), lambda: __lg.and_(lambda: i < __lg.len_(x), lambda: __lg.not_(abs(__lg.item(x, i)) < tol)))

    def __lg_loop_body():
        nonlocal __lg_do_return, __lg_retval, i, x

        def __lg_get_state_1():
            return (__lg_do_return, __lg_retval, i, x)

        def __lg_set_state_1(__lg_vars_1):
            nonlocal __lg_do_return, __lg_retval, i, x
            __lg_do_return, __lg_retval, i, x = __lg_vars_1

        def __lg_if_body():
            nonlocal __lg_do_return, __lg_retval, i, x
            __lg_do_return = True
            __lg_retval = -1

        def __lg_else_body():
            nonlocal __lg_do_return, __lg_retval, i, x
            x = __lg.setitem(x, i, __lg.item(x, i) / 2)
            i = __lg.iadd(i, 1, 'i')
        __lg.if_stmt(__lg.item(x, i) > 10, __lg_if_body, __lg_else_body, __lg_get_state_1, __lg_set_state_1, ('__lg_do_return', '__lg_retval', 'i', 'x'), 4, __lg_src.loc(28, 8))
    __lg.while_stmt(__lg_loop_test, __lg_loop_body, __lg_get_state, __lg_set_state, ('__lg_do_return', '__lg_retval', 'i', 'x'), __lg_src.loc(27, 4))

    def __lg_get_state_2():
        return (__lg_retval, __lg_do_return)

    def __lg_set_state_2(__lg_vars_2):
        nonlocal __lg_retval, __lg_do_return
        __lg_retval, __lg_do_return = __lg_vars_2

    def __lg_if_body_1():
        nonlocal __lg_do_return, __lg_retval
        __lg_do_return = True
        __lg_retval = i

    def __lg_else_body_1():
        nonlocal __lg_do_return, __lg_retval
        __lg_do_return = True
    __lg.if_stmt(__lg.not_(__lg_do_return), __lg_if_body_1, __lg_else_body_1, __lg_get_state_2, __lg_set_state_2, ('__lg_retval', '__lg_do_return'), 1, __lg_src.loc(32, 4))
    return __lg_retval
