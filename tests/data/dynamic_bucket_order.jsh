// Generates dynamic_bucket_order.txt (JDK 17):
//   jshell -q tests/data/dynamic_bucket_order.jsh > tests/data/dynamic_bucket_order.txt
// Each line: the (bucket:hashCount) HASH files of a partition in manifest order, then the order in
// which a HashMap<Integer, Long> filled by one compute(bucket, +1) call per hash iterates them.
import java.util.*;
void emit(int[][] files) {
  HashMap<Integer, Long> counts = new HashMap<>();
  StringBuilder in = new StringBuilder();
  for (int[] f : files) {
    in.append(f[0]).append(':').append(f[1]).append(',');
    for (int i = 0; i < f[1]; i++) counts.compute(f[0], (k, n) -> n == null ? 1L : n + 1);
  }
  StringBuilder out = new StringBuilder();
  for (Integer b : counts.keySet()) out.append(b).append(',');
  System.out.println(in + " " + out);
}
int[][] ones(int... buckets) { int[][] f = new int[buckets.length][]; for (int i = 0; i < buckets.length; i++) f[i] = new int[] {buckets[i], 1}; return f; }
emit(ones(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12));
emit(ones(3, 16, 5, 20, 7, 40, 9, 1, 2, 4, 33, 34, 35));
emit(new int[][] {{3, 1}, {16, 1}, {5, 1}, {20, 1}, {7, 1}, {40, 1}, {9, 1}, {1, 1}, {2, 1}, {4, 1}, {33, 1}, {34, 1}, {35, 2}});
emit(new int[][] {{3, 1}, {16, 1}, {5, 1}, {20, 1}, {7, 1}, {40, 1}, {9, 1}, {1, 1}, {2, 1}, {4, 1}, {33, 1}, {34, 1}, {35, 1}, {3, 1}});
Random random = new Random(20240601);
for (int s = 0; s < 60; s++) {
  int stride = new int[] {1, 2, 3, 4, 8, 16, 32, 64, 128}[random.nextInt(9)];
  int start = random.nextInt(stride);
  int n = 1 + random.nextInt(s < 30 ? 30 : 120);
  int[][] files = new int[n][];
  for (int i = 0; i < n; i++) files[i] = new int[] {start + stride * random.nextInt(Math.max(1, 32766 / stride > 200 ? 200 : 32766 / stride)), random.nextInt(4)};
  emit(files);
}
/exit
