import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import javax.transaction.xa.Xid;

/**
 * What the tests' JSON-scripted JMS programs share, with no JMS in it: the JSON commands read
 * from stdin and results written to stdout, the typed-value encoding ({@code {"int": 3}},
 * {@code {"bytes": "<base64>"}}, ...; tests/artemis/jms.py documents it), command fields, and
 * Xids. JmsScenario (the Artemis client) and openwire/OpenWireScenario (the ActiveMQ Classic
 * clients, javax or jakarta) extend it, so its helpers read unqualified in both.
 */
public abstract class ScenarioSupport {
    /** The commands on {@code in}, one JSON object a line; IllegalArgumentException if one is not. */
    static List<Map<String, Object>> readCommands(InputStream in) throws IOException {
        BufferedReader lines = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
        List<Map<String, Object>> commands = new ArrayList<>();
        for (String line; (line = lines.readLine()) != null; ) {
            if (!line.isBlank()) {
                commands.add(asMap(new JsonReader(line).document()));
            }
        }
        return commands;
    }

    /** The Xid a command names: {"format": n, "gtrid": text, "bqual": text} (UTF-8 bytes). */
    static Xid xid(Map<String, Object> c) {
        Map<String, Object> x = asMap(c.get("xid"));
        return new TestXid((int) num(x, "format", 1), str(x, "gtrid", "").getBytes(StandardCharsets.UTF_8),
                str(x, "bqual", "").getBytes(StandardCharsets.UTF_8));
    }

    static List<Object> xids(Xid[] found) {
        List<Object> out = new ArrayList<>();
        for (Xid x : found) {
            Map<String, Object> d = new LinkedHashMap<>();
            d.put("format", (long) x.getFormatId());
            d.put("gtrid", new String(x.getGlobalTransactionId(), StandardCharsets.UTF_8));
            d.put("bqual", new String(x.getBranchQualifier(), StandardCharsets.UTF_8));
            out.add(d);
        }
        return out;
    }

    /** A transaction branch id as a transaction manager makes one. */
    record TestXid(int formatId, byte[] gtrid, byte[] bqual) implements Xid {
        @Override
        public int getFormatId() {
            return formatId;
        }

        @Override
        public byte[] getGlobalTransactionId() {
            return gtrid;
        }

        @Override
        public byte[] getBranchQualifier() {
            return bqual;
        }
    }

    /** A JSON value (plain Java) as the JMS value it names: {"int": 3} is an Integer, ... */
    static Object typed(Object v) {
        if (v instanceof Long l) {
            return l >= Integer.MIN_VALUE && l <= Integer.MAX_VALUE ? (Object) l.intValue() : l;
        }
        if (v instanceof List<?> list) {
            ArrayList<Object> out = new ArrayList<>();
            list.forEach(x -> out.add(typed(x)));
            return out;
        }
        if (!(v instanceof Map<?, ?> map)) {
            return v;
        }
        if (map.size() == 1) {
            Map.Entry<?, ?> e = map.entrySet().iterator().next();
            Object x = e.getValue();
            switch (String.valueOf(e.getKey())) {
                case "byte": return ((Number) x).byteValue();
                case "short": return ((Number) x).shortValue();
                case "int": return ((Number) x).intValue();
                case "long": return ((Number) x).longValue();
                case "float": return ((Number) x).floatValue();
                case "double": return ((Number) x).doubleValue();
                case "char": return ((String) x).charAt(0);
                case "bytes": return Base64.getDecoder().decode((String) x);
                default: break;
            }
        }
        LinkedHashMap<String, Object> out = new LinkedHashMap<>();
        map.forEach((k, x) -> out.put(String.valueOf(k), typed(x)));
        return out;
    }

    /** A JMS value as JSON (plain Java): strings, booleans and null bare, the rest tagged. */
    static Object tag(Object v) {
        String kind = v instanceof Byte ? "byte" : v instanceof Short ? "short" : v instanceof Integer ? "int"
                : v instanceof Long ? "long" : v instanceof Float ? "float" : v instanceof Double ? "double" : null;
        if (kind != null) {
            return Map.of(kind, v instanceof Float f ? (Object) Double.valueOf(f.toString()) : v);
        }
        if (v instanceof Character ch) {
            return Map.of("char", ch.toString());
        }
        if (v instanceof byte[] b) {
            return Map.of("bytes", Base64.getEncoder().encodeToString(b));
        }
        if (v instanceof Map<?, ?> map) {
            LinkedHashMap<String, Object> out = new LinkedHashMap<>();
            map.forEach((k, x) -> out.put(String.valueOf(k), tag(x)));
            return out;
        }
        if (v instanceof List<?> list) {
            ArrayList<Object> out = new ArrayList<>();
            list.forEach(x -> out.add(tag(x)));
            return out;
        }
        if (v == null || v instanceof String || v instanceof Boolean) {
            return v;
        }
        return Map.of("object", v.getClass().getName(), "string", v.toString());
    }

    static Map<String, Object> event(String name, String key, Object value) {
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("event", name);
        if (key != null) {
            e.put(key, value);
        }
        return e;
    }

    static synchronized void emit(Map<String, Object> line) {
        StringBuilder out = new StringBuilder();
        write(out, line);
        System.out.println(out);
        System.out.flush();
    }

    static void write(StringBuilder out, Object v) {
        if (v instanceof Map<?, ?> map) {
            out.append('{');
            String sep = "";
            for (Map.Entry<?, ?> e : map.entrySet()) {
                out.append(sep);
                write(out, String.valueOf(e.getKey()));
                out.append(':');
                write(out, e.getValue());
                sep = ",";
            }
            out.append('}');
        } else if (v instanceof List<?> list) {
            out.append('[');
            String sep = "";
            for (Object x : list) {
                out.append(sep);
                write(out, x);
                sep = ",";
            }
            out.append(']');
        } else if (v instanceof String s) {
            out.append('"');
            for (char ch : s.toCharArray()) {
                switch (ch) {
                    case '"' -> out.append("\\\"");
                    case '\\' -> out.append("\\\\");
                    case '\n' -> out.append("\\n");
                    case '\r' -> out.append("\\r");
                    case '\t' -> out.append("\\t");
                    default -> {
                        if (ch < 0x20) {
                            out.append(String.format("\\u%04x", (int) ch));
                        } else {
                            out.append(ch);
                        }
                    }
                }
            }
            out.append('"');
        } else if (v instanceof Double d && (d.isNaN() || d.isInfinite())) {
            out.append('"').append(d).append('"');
        } else {
            out.append(v);  // null, Boolean, Long, Integer, Double
        }
    }

    /** A JSON reader for one line: objects, arrays, strings, numbers (Long or Double), literals. */
    static final class JsonReader {
        private final String s;
        private int i;

        JsonReader(String s) {
            this.s = s;
        }

        Object document() {
            Object v = value();
            skip();
            if (i != s.length()) {
                throw fail("trailing characters");
            }
            return v;
        }

        private Object value() {
            skip();
            if (i >= s.length()) {
                throw fail("unexpected end");
            }
            char ch = s.charAt(i);
            if (ch == '{') {
                Map<String, Object> out = new LinkedHashMap<>();
                i++;
                if (peek('}')) {
                    return out;
                }
                do {
                    skip();
                    String key = string();
                    expect(':');
                    out.put(key, value());
                } while (peek(','));
                expect('}');
                return out;
            }
            if (ch == '[') {
                List<Object> out = new ArrayList<>();
                i++;
                if (peek(']')) {
                    return out;
                }
                do {
                    out.add(value());
                } while (peek(','));
                expect(']');
                return out;
            }
            if (ch == '"') {
                return string();
            }
            for (String lit : new String[] {"true", "false", "null"}) {
                if (s.startsWith(lit, i)) {
                    i += lit.length();
                    return lit.equals("null") ? null : Boolean.valueOf(lit);
                }
            }
            int start = i;
            while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) {
                i++;
            }
            String n = s.substring(start, i);
            if (n.isEmpty()) {
                throw fail("unexpected character");
            }
            return n.matches("-?\\d+") ? (Object) Long.valueOf(n) : (Object) Double.valueOf(n);
        }

        private String string() {
            if (i >= s.length() || s.charAt(i) != '"') {
                throw fail("expected a string");
            }
            StringBuilder out = new StringBuilder();
            for (i++; ; i++) {
                if (i >= s.length()) {
                    throw fail("unterminated string");
                }
                char ch = s.charAt(i);
                if (ch == '"') {
                    i++;
                    return out.toString();
                }
                if (ch != '\\') {
                    out.append(ch);
                    continue;
                }
                char esc = s.charAt(++i);
                switch (esc) {
                    case 'b' -> out.append('\b');
                    case 'f' -> out.append('\f');
                    case 'n' -> out.append('\n');
                    case 'r' -> out.append('\r');
                    case 't' -> out.append('\t');
                    case 'u' -> {
                        out.append((char) Integer.parseInt(s.substring(i + 1, i + 5), 16));
                        i += 4;
                    }
                    default -> out.append(esc);  // \" \\ \/
                }
            }
        }

        private void skip() {
            while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
                i++;
            }
        }

        private boolean peek(char ch) {
            skip();
            if (i < s.length() && s.charAt(i) == ch) {
                i++;
                return true;
            }
            return false;
        }

        private void expect(char ch) {
            if (!peek(ch)) {
                throw fail("expected '" + ch + "'");
            }
        }

        private IllegalArgumentException fail(String what) {
            return new IllegalArgumentException("JSON: " + what + " at " + i + " of " + s);
        }
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> asMap(Object v) {
        if (!(v instanceof Map)) {
            throw new IllegalArgumentException("expected a JSON object, got " + v);
        }
        return (Map<String, Object>) v;
    }

    static String str(Map<String, Object> c, String key, String dflt) {
        Object v = c.get(key);
        return v == null ? dflt : v.toString();
    }

    static long num(Map<String, Object> c, String key, long dflt) {
        Object v = c.get(key);
        return v == null ? dflt : ((Number) v).longValue();
    }

    static boolean bool(Map<String, Object> c, String key, boolean dflt) {
        Object v = c.get(key);
        return v == null ? dflt : (Boolean) v;
    }
}
