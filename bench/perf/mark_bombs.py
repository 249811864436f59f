#!/usr/bin/env python3
# A run that holds only marks, to measure what analyze keeps of them:
#   mark_bombs.py events      2 000 000 event marks with short texts
#   mark_bombs.py texts N     N event marks with distinct texts of 1 MiB
import sys
kind = sys.argv[1]
t0 = 1764430000000000000
w = sys.stdout.write
w('{"type":"run","name":"marks","start_ns":%d,"end_ns":%d,"interval_ns":10000000}\n' % (t0, t0 + 3600*10**9))
w('{"type":"gpu","gpu":0,"uuid":"GPU-0","name":"G","total_bytes":80000000000}\n')
w('{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":1073741824}\n' % (t0 + 10**9))
if kind == "events":
    n = 2_000_000
    for i in range(n):
        w('{"type":"mark","t_ns":%d,"kind":"event","text":"event number %d of the hostile run"}\n' % (t0 + 10**9 + i * 1000, i))
else:
    n = int(sys.argv[2])
    for i in range(n):
        body = ("%08d" % i) * (1 << 17)  # 1 MiB, distinct per mark
        w('{"type":"mark","t_ns":%d,"kind":"event","text":"%s"}\n' % (t0 + 10**9 + i * 10**6, body))
w('{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":1073741824}\n' % (t0 + 3000*10**9))
