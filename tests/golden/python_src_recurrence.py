import numpy as np
from llgrad.transform.printers.python_src import prim_impl as __lg_impl

def recurrence(x_0):
    v_1 = np.array(1, dtype=np.int64)
    v_2 = np.array(4, dtype=np.int64)
    v_3 = np.array(1, dtype=np.int64)
    v_4 = np.array(0.0, dtype=np.float64)
    v_6 = v_4
    for __lg_i in range(int(v_1), int(v_2), int(v_3)):
        i_7 = np.int64(__lg_i)
        v_8 = np.array(0.9, dtype=np.float64)
        v_9 = np.multiply(v_8, v_6)
        v_10 = x_0[(i_7,)]
        v_11 = np.sin(v_10)
        v_12 = np.array(1, dtype=np.int64)
        v_13 = np.subtract(i_7, v_12)
        v_14 = x_0[(v_13,)]
        v_15 = np.multiply(v_11, v_14)
        v_16 = np.add(v_9, v_15)
        v_6 = v_16
    v_5 = v_6
    return (v_5,)
