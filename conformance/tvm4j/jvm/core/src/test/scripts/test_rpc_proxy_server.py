# Licensed to the Apache Software Foundation (ASF) under one
# or more contributor license agreements.  See the NOTICE file
# distributed with this work for additional information
# regarding copyright ownership.  The ASF licenses this file
# to you under the Apache License, Version 2.0 (the
# "License"); you may not use this file except in compliance
# with the License.  You may obtain a copy of the License at
#
#   http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing,
# software distributed under the License is distributed on an
# "AS IS" BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY
# KIND, either express or implied.  See the License for the
# specific language governing permissions and limitations
# under the License.
import time
from tvm.rpc import proxy


def start_proxy_server(port, timeout):
    prox = proxy.Proxy("127.0.0.1", port=port, port_end=port + 1)
    if timeout > 0:
        import time

        time.sleep(timeout)
        prox.terminate()
    else:
        prox.proc.join()


if __name__ == "__main__":
    import sys

    if len(sys.argv) < 2:
        sys.exit(-1)
    port = int(sys.argv[1])
    timeout = 0 if len(sys.argv) == 2 else float(sys.argv[2])
    start_proxy_server(port, timeout)
