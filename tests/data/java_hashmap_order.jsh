// Generates java_hashmap_order.txt: jshell -q tests/data/java_hashmap_order.jsh > tests/data/java_hashmap_order.txt (JDK 17)
import java.util.*;
List<String> keys = new ArrayList<>();
String[] ab = {"Aa", "BB"};
for (int i = 0; i < 32; i++) { StringBuilder sb = new StringBuilder(); for (int b = 0; b < 5; b++) sb.append(ab[(i >> b) & 1]); keys.add(sb.toString()); }
List<String> all = new ArrayList<>();
for (int i = 0; i < 70; i++) { all.add("k" + i); if (i < 32) all.add(keys.get((i * 7) % 32)); }
HashMap<String,Integer> put = new HashMap<>(); for (String k : all) put.put(k, 1);
HashMap<String,Integer> cia = new HashMap<>(); for (String k : all) cia.computeIfAbsent(k, x -> 1);
System.out.println("INSERT " + String.join(",", all));
System.out.println("PUT " + String.join(",", put.keySet()));
System.out.println("CIA " + String.join(",", cia.keySet()));
List<Long> longs = new ArrayList<>();
for (long i = 0; i < 90; i++) longs.add(i % 3 == 0 ? ((i << 32) | i) : i * 1000003L);
HashMap<Long,Integer> lp = new HashMap<>(); for (Long k : longs) lp.computeIfAbsent(k, x -> 1);
StringBuilder o = new StringBuilder(); for (Long k : lp.keySet()) o.append(k).append(",");
StringBuilder in = new StringBuilder(); for (Long k : longs) in.append(k).append(",");
System.out.println("LINSERT " + in);
System.out.println("LCIA " + o);
/exit
