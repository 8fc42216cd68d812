/*
 * tvmrt's own test of tvm4j (not one of tvm4j's): remote tensors as a tvm4j user makes them
 * (issue 48). tvm4j's Java server (its processor runs tvmrt's rpc.ServerLoop) serves the
 * session; the client asks the session for its CPU (RPCSession.device: the device type masked
 * with the session's index, as TVM's client does), allocates NDArrays there, fills them, calls
 * TVM v0.20's myadd of an uploaded library on them on the server, reads them back and copies
 * them to a local NDArray. Every NDArray call goes through tvm4j's JNI to the classic C API
 * (TVMArrayAlloc, TVMArrayCopyFromBytes/ToBytes, TVMArrayCopyFromTo, TVMFuncCall).
 */
package org.apache.tvm.rpc;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import java.io.File;
import org.apache.tvm.Device;
import org.apache.tvm.Function;
import org.apache.tvm.Module;
import org.apache.tvm.NDArray;
import org.apache.tvm.TestUtils;
import org.junit.Test;

public class RemoteTensorTest {
  @Test
  public void test_remote_ndarrays_through_myadd() throws Exception {
    TestUtils.RefInt port = new TestUtils.RefInt();
    Server server = TestUtils.startServer(port);
    try {
      RPCSession sess = Client.connect("127.0.0.1", port.value);
      Device dev = sess.device("cpu", 0);
      assertTrue("a masked device type: " + dev.deviceType, dev.deviceType > 128);
      assertEquals(1, dev.deviceType % 128);
      sess.upload(new File(System.getProperty("test.tempdir"), "add_cpu.so"));
      Module fadd = sess.loadModule("add_cpu.so");
      Function myadd = fadd.getFunction("myadd");

      long[] shape = new long[] {5};
      NDArray a = NDArray.empty(shape, dev);
      NDArray c = NDArray.empty(shape, dev);
      a.copyFrom(new float[] {1f, 2f, 3f, 4f, 5.5f});
      assertArrayEquals(new float[] {1f, 2f, 3f, 4f, 5.5f}, a.asFloatArray(), 0f);
      myadd.call(a, a, c);
      float[] want = new float[] {2f, 4f, 6f, 8f, 11f};
      assertArrayEquals(want, c.asFloatArray(), 0f);

      NDArray local = NDArray.empty(shape, new Device("cpu", 0));
      c.copyTo(local);
      assertArrayEquals(want, local.asFloatArray(), 0f);
      // Back to the server, into a, and once more through myadd: a + a.
      local.copyTo(a);
      myadd.call(a, a, c);
      assertArrayEquals(new float[] {4f, 8f, 12f, 16f, 22f}, c.asFloatArray(), 0f);

      a.release();
      c.release();
      local.release();
      myadd.release();
      fadd.release();
    } finally {
      server.terminate();
    }
  }
}
