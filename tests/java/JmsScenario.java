import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.Serializable;
import java.io.StringReader;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.Enumeration;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import javax.jms.BytesMessage;
import javax.jms.CompletionListener;
import javax.jms.Connection;
import javax.jms.DeliveryMode;
import javax.jms.Destination;
import javax.jms.JMSException;
import javax.jms.MapMessage;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.MessageEOFException;
import javax.jms.MessageProducer;
import javax.jms.ObjectMessage;
import javax.jms.Queue;
import javax.jms.QueueBrowser;
import javax.jms.Session;
import javax.jms.StreamMessage;
import javax.jms.TextMessage;
import javax.jms.Topic;
import javax.jms.XAConnection;
import javax.jms.XASession;
import javax.transaction.xa.XAException;
import javax.transaction.xa.XAResource;
import javax.transaction.xa.Xid;

import org.apache.activemq.artemis.api.jms.ActiveMQJMSConstants;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;
import org.apache.activemq.artemis.jms.client.ActiveMQXAConnectionFactory;
import org.apache.activemq.artemis.json.JsonArray;
import org.apache.activemq.artemis.json.JsonNumber;
import org.apache.activemq.artemis.json.JsonObject;
import org.apache.activemq.artemis.json.JsonString;
import org.apache.activemq.artemis.json.JsonValue;
import org.apache.activemq.artemis.utils.JsonLoader;

/**
 * A scripted JMS client for the tests: the real Artemis JMS client, driven by JSON.
 *
 * <p>Reads one JSON command per line on stdin and runs them in order over one connection and
 * one current session; prints one JSON result line per command on stdout ({@code "ok": true}
 * or {@code false} with an {@code "error"}), plus event lines ({@code "event": ...}) for
 * progress and for asynchronous connection failures. The first failed command ends the run
 * (later commands depend on it). Exit status: 0 every command ran, 1 a command failed, 2 the
 * input was not understood. tests/artemis/jms.py documents the commands and the typed-value
 * encoding ({@code {"int": 3}}, {@code {"bytes": "<base64>"}}, ...).
 */
public final class JmsScenario {
    private static final int INDIVIDUAL_ACK = ActiveMQJMSConstants.INDIVIDUAL_ACKNOWLEDGE;

    private Connection connection;
    private Session session;
    private Message lastReceived;
    private final Map<String, MessageConsumer> consumers = new HashMap<>();
    /** The XA session's resource (xa_connect), for the xa_* ops. */
    private XAResource xaResource;

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        List<Map<String, Object>> commands = new ArrayList<>();
        try {
            for (String line; (line = in.readLine()) != null; ) {
                if (!line.isBlank()) {
                    commands.add(asMap(plain(JsonLoader.readObject(new StringReader(line)))));
                }
            }
        } catch (RuntimeException e) {
            System.err.println("JmsScenario: bad input: " + e);
            System.exit(2);
        }
        System.exit(new JmsScenario().run(commands));
    }

    private int run(List<Map<String, Object>> commands) {
        int status = 0;
        for (Map<String, Object> command : commands) {
            String op = String.valueOf(command.get("op"));
            Map<String, Object> result = new LinkedHashMap<>();
            result.put("op", op);
            try {
                execute(op, command, result);
                result.put("ok", true);
            } catch (IllegalArgumentException e) {
                System.err.println("JmsScenario: bad command " + command + ": " + e.getMessage());
                status = 2;
            } catch (Exception e) {
                result.put("ok", false);
                result.put("error", describe(e));
                status = 1;
            }
            if (status == 2) {
                break;
            }
            emit(result);
            if (status != 0) {
                break;
            }
        }
        closeQuietly();
        return status;
    }

    private void execute(String op, Map<String, Object> c, Map<String, Object> result) throws Exception {
        switch (op) {
            case "connect" -> connect(c);
            case "session" -> session = newSession(c);
            case "send" -> send(c, result);
            case "consumer" -> consumers.put(str(c, "id", null), consumer(c));
            case "receive" -> receive(c, result);
            case "close_consumer" -> consumers.remove(str(c, "id", null)).close();
            case "browse" -> browse(c, result);
            case "acknowledge" -> lastReceived.acknowledge();
            case "commit" -> session.commit();
            case "rollback" -> session.rollback();
            case "recover" -> session.recover();
            case "unsubscribe" -> session.unsubscribe(str(c, "name", null));
            case "close" -> closeConnection();
            case "xa_connect" -> xaConnect(c);
            case "xa_start" -> xaResource.start(xid(c), switch (str(c, "flags", "none")) {
                case "join" -> XAResource.TMJOIN;
                case "resume" -> XAResource.TMRESUME;
                default -> XAResource.TMNOFLAGS;
            });
            case "xa_end" -> xaResource.end(xid(c), switch (str(c, "flags", "success")) {
                case "fail" -> XAResource.TMFAIL;
                case "suspend" -> XAResource.TMSUSPEND;
                default -> XAResource.TMSUCCESS;
            });
            case "xa_prepare" -> result.put("vote", (long) xaResource.prepare(xid(c)));
            case "xa_commit" -> xaResource.commit(xid(c), bool(c, "onePhase", false));
            case "xa_rollback" -> xaResource.rollback(xid(c));
            case "xa_forget" -> xaResource.forget(xid(c));
            case "xa_recover" -> result.put("xids", xids(xaResource.recover(XAResource.TMSTARTRSCAN | XAResource.TMENDRSCAN)));
            case "xa_timeout" -> result.put("set", xaResource.setTransactionTimeout((int) num(c, "seconds", 0)));
            default -> throw new IllegalArgumentException("unknown op " + op);
        }
    }

    // ------------------------------------------------------------------ connection, session

    private void connect(Map<String, Object> c) throws JMSException {
        closeConnection();
        ActiveMQConnectionFactory factory = new ActiveMQConnectionFactory(str(c, "url", null));
        String user = str(c, "user", null);
        connection = user == null ? factory.createConnection()
                : factory.createConnection(user, str(c, "password", null));
        connection.setExceptionListener(e -> {
            Map<String, Object> event = new LinkedHashMap<>();
            event.put("event", "exception");
            event.put("error", describe(e));
            emit(event);
        });
        String clientId = str(c, "clientId", null);
        if (clientId != null) {
            connection.setClientID(clientId);
        }
        connection.start();
        session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
    }

    /** A new XA connection (started) and one XA session: its Session becomes the current one. */
    private void xaConnect(Map<String, Object> c) throws JMSException {
        closeConnection();
        ActiveMQXAConnectionFactory factory = new ActiveMQXAConnectionFactory(str(c, "url", null));
        String user = str(c, "user", null);
        XAConnection xa = user == null ? factory.createXAConnection()
                : factory.createXAConnection(user, str(c, "password", null));
        connection = xa;
        connection.start();
        XASession xaSession = xa.createXASession();
        session = xaSession.getSession();
        xaResource = xaSession.getXAResource();
    }

    /** The Xid a command names: {"format": n, "gtrid": text, "bqual": text} (UTF-8 bytes). */
    private static Xid xid(Map<String, Object> c) {
        Map<String, Object> x = asMap(c.get("xid"));
        return new TestXid((int) num(x, "format", 1), str(x, "gtrid", "").getBytes(StandardCharsets.UTF_8),
                str(x, "bqual", "").getBytes(StandardCharsets.UTF_8));
    }

    private static List<Object> xids(Xid[] found) {
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
    private record TestXid(int formatId, byte[] gtrid, byte[] bqual) implements Xid {
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

    private Session newSession(Map<String, Object> c) throws JMSException {
        if (bool(c, "transacted", false)) {
            return connection.createSession(true, Session.SESSION_TRANSACTED);
        }
        String ack = str(c, "ack", "auto");
        int mode = switch (ack) {
            case "auto" -> Session.AUTO_ACKNOWLEDGE;
            case "client" -> Session.CLIENT_ACKNOWLEDGE;
            case "dups_ok" -> Session.DUPS_OK_ACKNOWLEDGE;
            case "individual" -> INDIVIDUAL_ACK;
            default -> throw new IllegalArgumentException("unknown ack mode " + ack);
        };
        return connection.createSession(false, mode);
    }

    private void closeConnection() throws JMSException {
        consumers.clear();
        xaResource = null;
        if (connection != null) {
            Connection c = connection;
            connection = null;
            session = null;
            c.close();
        }
    }

    private void closeQuietly() {
        try {
            closeConnection();
        } catch (Exception e) {
            System.err.println("JmsScenario: closing the connection: " + e);
        }
    }

    private Destination destination(Map<String, Object> c) throws JMSException {
        if (c.containsKey("queue")) {
            return session.createQueue(str(c, "queue", null));
        }
        if (c.containsKey("topic")) {
            return session.createTopic(str(c, "topic", null));
        }
        throw new IllegalArgumentException("no queue or topic");
    }

    // ------------------------------------------------------------------ send

    private void send(Map<String, Object> c, Map<String, Object> result) throws Exception {
        MessageProducer producer = session.createProducer(destination(c));
        producer.setDeliveryMode(bool(c, "persistent", true) ? DeliveryMode.PERSISTENT : DeliveryMode.NON_PERSISTENT);
        producer.setPriority((int) num(c, "priority", Message.DEFAULT_PRIORITY));
        producer.setTimeToLive(num(c, "ttl", 0));
        producer.setDeliveryDelay(num(c, "delay", 0));
        long count = num(c, "count", 1);
        long progress = num(c, "progress", 0);
        boolean async = bool(c, "completion", false);
        List<Object> ids = new ArrayList<>();
        List<Object> failed = Collections.synchronizedList(new ArrayList<>());
        CountDownLatch completions = new CountDownLatch((int) (async ? count : 0));
        result.put("ids", ids);
        result.put("sent", 0L);
        for (long i = 0; i < count; i++) {
            Message m = message(c, i);
            if (async) {
                producer.send(m, new CompletionListener() {
                    public void onCompletion(Message message) {
                        completions.countDown();
                    }

                    public void onException(Message message, Exception e) {
                        failed.add(describe(e));
                        completions.countDown();
                    }
                });
            } else {
                producer.send(m);
            }
            ids.add(m.getJMSMessageID());
            result.put("sent", i + 1);
            if (progress > 0 && (i + 1) % progress == 0) {
                emit(Map.of("event", "progress", "sent", i + 1));
            }
        }
        if (async) {
            long waitMs = num(c, "completionTimeout", 30000);
            result.put("completed", completions.await(waitMs, TimeUnit.MILLISECONDS));
            result.put("failed", failed);
        }
        producer.close();
    }

    private Message message(Map<String, Object> c, long index) throws Exception {
        String type = str(c, "type", "text");
        Object body = c.get("body");
        long size = num(c, "size", -1);
        Message m;
        switch (type) {
            case "text" -> {
                String text = size >= 0 ? new String(pattern((int) size), StandardCharsets.ISO_8859_1)
                        : String.valueOf(body == null ? "" : body).replace("{i}", Long.toString(index));
                m = session.createTextMessage(text);
            }
            case "bytes" -> {
                BytesMessage b = session.createBytesMessage();
                b.writeBytes(size >= 0 ? pattern((int) size) : Base64.getDecoder().decode(String.valueOf(body)));
                m = b;
            }
            case "map" -> {
                MapMessage map = session.createMapMessage();
                for (Map.Entry<String, Object> e : asMap(body).entrySet()) {
                    map.setObject(e.getKey(), typed(e.getValue()));
                }
                m = map;
            }
            case "object" -> m = session.createObjectMessage((Serializable) typed(body));
            case "stream" -> {
                StreamMessage s = session.createStreamMessage();
                for (Object v : (List<?>) body) {
                    s.writeObject(typed(v));
                }
                m = s;
            }
            case "message" -> m = session.createMessage();
            default -> throw new IllegalArgumentException("unknown message type " + type);
        }
        if (c.get("properties") != null) {
            for (Map.Entry<String, Object> e : asMap(c.get("properties")).entrySet()) {
                m.setObjectProperty(e.getKey(), typed(e.getValue()));
            }
        }
        if (c.get("indexProperty") != null) {
            m.setLongProperty(str(c, "indexProperty", null), index);
        }
        if (c.get("correlationId") != null) {
            m.setJMSCorrelationID(str(c, "correlationId", null));
        }
        if (c.get("jmsType") != null) {
            m.setJMSType(str(c, "jmsType", null));
        }
        if (c.get("replyTo") != null) {
            String to = str(c, "replyTo", null);
            m.setJMSReplyTo(to.startsWith("topic://") ? session.createTopic(to.substring(8)) : session.createQueue(to));
        }
        return m;
    }

    /** The body of a {@code "size"} message: byte i is i % 251 (tests/artemis/jms.py pattern()). */
    private static byte[] pattern(int size) {
        byte[] b = new byte[size];
        for (int i = 0; i < size; i++) {
            b[i] = (byte) (i % 251);
        }
        return b;
    }

    // ------------------------------------------------------------------ receive, browse

    private MessageConsumer consumer(Map<String, Object> c) throws JMSException {
        Destination d = destination(c);
        String selector = str(c, "selector", null);
        String durable = str(c, "durable", null);
        String shared = str(c, "shared", null);
        if (durable != null) {
            return bool(c, "sharedDurable", false) ? session.createSharedDurableConsumer((Topic) d, durable, selector)
                    : session.createDurableSubscriber((Topic) d, durable, selector, bool(c, "noLocal", false));
        }
        if (shared != null) {
            return session.createSharedConsumer((Topic) d, shared, selector);
        }
        return session.createConsumer(d, selector, bool(c, "noLocal", false));
    }

    private void receive(Map<String, Object> c, Map<String, Object> result) throws Exception {
        String id = str(c, "consumer", null);
        MessageConsumer consumer = id != null ? consumers.get(id) : consumer(c);
        long count = num(c, "count", 1);
        long timeout = num(c, "timeout", 5000);
        boolean digest = bool(c, "digest", false);
        String until = str(c, "until", null);
        List<Object> messages = new ArrayList<>();
        result.put("messages", messages);
        try {
            for (long i = 0; i < count; i++) {
                Message m = timeout > 0 ? consumer.receive(timeout) : consumer.receiveNoWait();
                if (m == null) {
                    break;
                }
                lastReceived = m;
                messages.add(describe(m, digest));
                if (until != null && m instanceof TextMessage t && until.equals(t.getText())) {
                    break;
                }
            }
            if (bool(c, "acknowledge", false) && lastReceived != null) {
                lastReceived.acknowledge();
            }
        } finally {
            if (id == null) {
                consumer.close();
            }
        }
    }

    private void browse(Map<String, Object> c, Map<String, Object> result) throws Exception {
        QueueBrowser browser = session.createBrowser((Queue) destination(c), str(c, "selector", null));
        List<Object> messages = new ArrayList<>();
        for (Enumeration<?> e = browser.getEnumeration(); e.hasMoreElements(); ) {
            messages.add(describe((Message) e.nextElement(), bool(c, "digest", false)));
        }
        browser.close();
        result.put("messages", messages);
    }

    private static Map<String, Object> describe(Message m, boolean digest) throws Exception {
        Map<String, Object> d = new LinkedHashMap<>();
        d.put("id", m.getJMSMessageID());
        d.put("destination", name(m.getJMSDestination()));
        d.put("persistent", m.getJMSDeliveryMode() == DeliveryMode.PERSISTENT);
        d.put("priority", (long) m.getJMSPriority());
        d.put("redelivered", m.getJMSRedelivered());
        d.put("timestamp", m.getJMSTimestamp());
        d.put("expiration", m.getJMSExpiration());
        d.put("correlationId", m.getJMSCorrelationID());
        d.put("jmsType", m.getJMSType());
        d.put("replyTo", name(m.getJMSReplyTo()));
        Map<String, Object> props = new LinkedHashMap<>();
        for (Enumeration<?> e = m.getPropertyNames(); e.hasMoreElements(); ) {
            String key = (String) e.nextElement();
            props.put(key, tag(m.getObjectProperty(key)));
        }
        d.put("properties", props);
        if (m instanceof TextMessage t) {
            d.put("type", "text");
            String text = t.getText();
            putBody(d, text == null ? null : text.getBytes(StandardCharsets.UTF_8), text, digest);
        } else if (m instanceof BytesMessage b) {
            d.put("type", "bytes");
            byte[] data = new byte[(int) b.getBodyLength()];
            b.readBytes(data);
            putBody(d, data, Base64.getEncoder().encodeToString(data), digest);
        } else if (m instanceof MapMessage map) {
            d.put("type", "map");
            Map<String, Object> body = new LinkedHashMap<>();
            for (Enumeration<?> e = map.getMapNames(); e.hasMoreElements(); ) {
                String key = (String) e.nextElement();
                body.put(key, tag(map.getObject(key)));
            }
            d.put("body", body);
        } else if (m instanceof ObjectMessage o) {
            d.put("type", "object");
            d.put("body", tag(o.getObject()));
        } else if (m instanceof StreamMessage s) {
            d.put("type", "stream");
            List<Object> body = new ArrayList<>();
            try {
                while (true) {
                    body.add(tag(s.readObject()));
                }
            } catch (MessageEOFException end) {
                d.put("body", body);
            }
        } else {
            d.put("type", "message");
        }
        return d;
    }

    private static void putBody(Map<String, Object> d, byte[] data, Object body, boolean digest) throws Exception {
        if (!digest || data == null) {
            d.put("body", body);
            return;
        }
        d.put("size", (long) data.length);
        StringBuilder hex = new StringBuilder();
        for (byte b : MessageDigest.getInstance("SHA-256").digest(data)) {
            hex.append(String.format("%02x", b));
        }
        d.put("sha256", hex.toString());
    }

    private static String name(Destination d) throws JMSException {
        if (d instanceof Queue q) {
            return "queue://" + q.getQueueName();
        }
        if (d instanceof Topic t) {
            return "topic://" + t.getTopicName();
        }
        return d == null ? null : d.toString();
    }

    // ------------------------------------------------------------------ typed values

    /** A JSON value (plain Java) as the JMS value it names: {"int": 3} is an Integer, ... */
    private static Object typed(Object v) {
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
    private static Object tag(Object v) {
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

    private static Map<String, Object> describe(Exception e) {
        Map<String, Object> d = new LinkedHashMap<>();
        d.put("class", e.getClass().getName());
        d.put("message", e.getMessage());
        if (e instanceof JMSException j) {
            d.put("errorCode", j.getErrorCode());
        }
        if (e instanceof XAException x) {
            d.put("xaErrorCode", (long) x.errorCode);
        }
        Throwable cause = e.getCause();
        if (cause != null) {
            d.put("cause", cause.getClass().getName() + ": " + cause.getMessage());
        }
        return d;
    }

    // ------------------------------------------------------------------ JSON in and out

    /** A parsed JSON value as plain Java: Map, List, String, Boolean, Long, Double or null. */
    private static Object plain(JsonValue v) {
        switch (v.getValueType()) {
            case OBJECT: {
                Map<String, Object> out = new LinkedHashMap<>();
                ((JsonObject) v).forEach((k, x) -> out.put(k, plain(x)));
                return out;
            }
            case ARRAY: {
                List<Object> out = new ArrayList<>();
                ((JsonArray) v).forEach(x -> out.add(plain(x)));
                return out;
            }
            case STRING: return ((JsonString) v).getString();
            case NUMBER: {
                JsonNumber n = (JsonNumber) v;
                return n.isIntegral() ? (Object) n.longValueExact() : (Object) n.doubleValue();
            }
            case TRUE: return Boolean.TRUE;
            case FALSE: return Boolean.FALSE;
            default: return null;
        }
    }

    private static synchronized void emit(Map<String, Object> line) {
        StringBuilder out = new StringBuilder();
        write(out, line);
        System.out.println(out);
        System.out.flush();
    }

    private static void write(StringBuilder out, Object v) {
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

    // ------------------------------------------------------------------ command fields

    @SuppressWarnings("unchecked")
    private static Map<String, Object> asMap(Object v) {
        if (!(v instanceof Map)) {
            throw new IllegalArgumentException("expected a JSON object, got " + v);
        }
        return (Map<String, Object>) v;
    }

    private static String str(Map<String, Object> c, String key, String dflt) {
        Object v = c.get(key);
        return v == null ? dflt : v.toString();
    }

    private static long num(Map<String, Object> c, String key, long dflt) {
        Object v = c.get(key);
        return v == null ? dflt : ((Number) v).longValue();
    }

    private static boolean bool(Map<String, Object> c, String key, boolean dflt) {
        Object v = c.get(key);
        return v == null ? dflt : (Boolean) v;
    }
}
