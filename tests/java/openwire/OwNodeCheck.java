import javax.jms.*;
import org.apache.activemq.ActiveMQConnectionFactory;

/**
 * A real ActiveMQ Classic client against a Junction node: one named check per run.
 * Usage: OwNodeCheck <brokerURL> <user> <password> <check>; prints "OK <check> <detail>" or fails.
 */
public class OwNodeCheck {
    static Connection connect(String url, String user, String pass, String clientId) throws JMSException {
        ActiveMQConnectionFactory f = new ActiveMQConnectionFactory(url);
        f.setUserName(user); f.setPassword(pass);
        Connection c = f.createConnection();
        if (clientId != null) c.setClientID(clientId);
        c.start();
        return c;
    }

    static void check(boolean ok, String what) { if (!ok) throw new RuntimeException("check failed: " + what); }

    public static void main(String[] a) throws Exception {
        int status = 1;
        try { run(a); status = 0; }
        catch (Throwable t) { t.printStackTrace(); }
        System.exit(status);  // a refused connection leaves the client's threads behind
    }

    static void run(String[] a) throws Exception {
        String url = a[0], user = a[1], pass = a[2], check = a[3];
        switch (check) {
            case "login": {
                try { connect(url, user, pass, null).close(); System.out.println("OK login accepted"); }
                catch (JMSException e) { System.out.println("REFUSED " + e.getClass().getName() + " " + e.getMessage()); }
                return;
            }
            case "clientid": {
                Connection c1 = connect(url, user, pass, "cid-dup");
                String second;
                try { connect(url, user, pass, "cid-dup").close(); second = "accepted"; }
                catch (InvalidClientIDException e) { second = "InvalidClientIDException"; }
                c1.close();
                Connection c3 = connect(url, user, pass, "cid-dup");
                c3.close();
                System.out.println("OK clientid " + second + " reusable");
                return;
            }
            case "queue": {
                Connection c = connect(url, user, pass, "cid-q");
                Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                Queue q = s.createQueue("ow.q1");
                MessageProducer p = s.createProducer(q);
                p.setDeliveryMode(DeliveryMode.PERSISTENT);
                int n = 20;
                for (int i = 0; i < n; i++) {
                    TextMessage m = s.createTextMessage("hello " + i + " \u00e9\ud83d\ude00");
                    m.setStringProperty("k", "v"); m.setIntProperty("i", i); m.setLongProperty("l", 1L << 40);
                    p.send(m);
                }
                BytesMessage b = s.createBytesMessage(); b.writeBytes(new byte[]{1, 2, 3}); p.send(b);
                MessageConsumer mc = s.createConsumer(q);
                java.util.Set<String> ids = new java.util.HashSet<>();
                for (int i = 0; i < n; i++) {
                    TextMessage m = (TextMessage) mc.receive(5000);
                    check(m != null, "message " + i + " received");
                    check(m.getText().equals("hello " + i + " \u00e9\ud83d\ude00"), "text " + i);
                    check(m.getIntProperty("i") == i && m.getLongProperty("l") == (1L << 40) && "v".equals(m.getStringProperty("k")), "properties " + i);
                    check(ids.add(m.getJMSMessageID()), "unique id");
                }
                BytesMessage got = (BytesMessage) mc.receive(5000);
                check(got != null && got.getBodyLength() == 3, "bytes body");
                check(mc.receive(300) == null, "queue empty");
                mc.close();
                c.close();
                System.out.println("OK queue " + n);
                return;
            }
            case "transacted": {
                Connection c = connect(url, user, pass, "cid-tx");
                Session tx = c.createSession(true, Session.SESSION_TRANSACTED);
                Queue q = tx.createQueue("ow.tx");
                MessageProducer p = tx.createProducer(q);
                p.send(tx.createTextMessage("rolled back"));
                tx.rollback();
                p.send(tx.createTextMessage("committed"));
                tx.commit();
                MessageConsumer mc = tx.createConsumer(q);
                TextMessage m = (TextMessage) mc.receive(5000);
                check(m != null && m.getText().equals("committed"), "committed message only");
                tx.rollback();
                TextMessage again = (TextMessage) mc.receive(5000);
                check(again != null && again.getText().equals("committed") && again.getJMSRedelivered(), "redelivered after rollback");
                tx.commit();
                check(mc.receive(300) == null, "acked by the commit");
                c.close();
                Connection after = connect(url, user, pass, "cid-tx-after");
                Session as = after.createSession(false, Session.AUTO_ACKNOWLEDGE);
                check(as.createConsumer(as.createQueue("ow.tx")).receive(500) == null, "the redelivered one was acked for good");
                after.close();
                System.out.println("OK transacted");
                return;
            }
            case "topic": {
                Connection c = connect(url, user, pass, "cid-t");
                Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                Topic t = s.createTopic("ow.t1");
                MessageConsumer plain = s.createConsumer(t);
                MessageConsumer durable = s.createDurableSubscriber(t, "sub1");
                s.createProducer(t).send(s.createTextMessage("to all"));
                TextMessage a1 = (TextMessage) plain.receive(5000);
                TextMessage a2 = (TextMessage) durable.receive(5000);
                check(a1 != null && a2 != null && a1.getText().equals("to all") && a2.getText().equals("to all"), "both subscribers");
                durable.close();
                s.createProducer(t).send(s.createTextMessage("kept"));
                MessageConsumer back = s.createDurableSubscriber(t, "sub1");
                TextMessage k = (TextMessage) back.receive(5000);
                check(k != null && k.getText().equals("kept"), "durable subscription kept a message");
                back.close();
                s.unsubscribe("sub1");
                c.close();
                System.out.println("OK topic");
                return;
            }
            case "pull": {
                Connection c = connect(url, user, pass, "cid-pull");
                Session s = c.createSession(false, Session.CLIENT_ACKNOWLEDGE);
                Queue q = s.createQueue("ow.pull?consumer.prefetchSize=0");
                MessageConsumer mc = s.createConsumer(q);
                check(mc.receiveNoWait() == null, "nothing yet");
                check(mc.receive(200) == null, "nothing within a timeout");
                s.createProducer(s.createQueue("ow.pull")).send(s.createTextMessage("pulled"));
                Message m = mc.receive(5000);
                check(m != null, "pulled message");
                m.acknowledge();
                c.close();
                System.out.println("OK pull");
                return;
            }
            case "browse": {
                Connection c = connect(url, user, pass, "cid-browse");
                Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                Queue q = s.createQueue("ow.browse");
                MessageProducer p = s.createProducer(q);
                for (int i = 0; i < 5; i++) {
                    TextMessage m = s.createTextMessage("b" + i); m.setIntProperty("n", i); p.send(m);
                }
                int seen = 0;
                java.util.Enumeration<?> e = s.createBrowser(q).getEnumeration();
                while (e.hasMoreElements()) { e.nextElement(); seen++; }
                int odd = 0;
                e = s.createBrowser(q, "n = 1 OR n = 3").getEnumeration();
                while (e.hasMoreElements()) { e.nextElement(); odd++; }
                MessageConsumer mc = s.createConsumer(q);
                int taken = 0;
                while (mc.receive(1000) != null) taken++;
                c.close();
                System.out.println("OK browse " + seen + " " + odd + " " + taken);
                return;
            }
            case "poison": {
                Connection c = connect(url + "?jms.redeliveryPolicy.initialRedeliveryDelay=0", user, pass, "cid-poison");
                Session tx = c.createSession(true, Session.SESSION_TRANSACTED);
                Queue q = tx.createQueue("ow.poison");
                tx.createProducer(q).send(tx.createTextMessage("bad"));
                tx.commit();
                MessageConsumer mc = tx.createConsumer(q);
                int deliveries = 0;
                Message m;
                while ((m = mc.receive(2000)) != null) {
                    deliveries++;
                    check(m.getIntProperty("JMSXDeliveryCount") == deliveries, "delivery count " + deliveries);
                    tx.rollback();
                }
                mc.close();
                MessageConsumer dlq = tx.createConsumer(tx.createQueue("DLQ"));
                Message dead = dlq.receive(5000);
                check(dead != null && ((TextMessage) dead).getText().equals("bad"), "dead-lettered");
                tx.commit();
                c.close();
                System.out.println("OK poison " + deliveries);
                return;
            }
            case "bodies": {
                Connection c = connect(url + "?jms.useCompression=true", user, pass, "cid-bodies");
                Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                Queue q = s.createQueue("ow.bodies");
                MessageProducer p = s.createProducer(q);
                MapMessage mm = s.createMapMessage();
                mm.setInt("i", 7); mm.setLong("l", 1L << 40); mm.setString("s", "text"); mm.setBoolean("b", true);
                mm.setShort("h", (short) 3); mm.setByte("y", (byte) 2); mm.setDouble("d", 1.5); mm.setFloat("f", 2.5f);
                mm.setChar("c", 'x'); mm.setBytes("a", new byte[]{9, 8});
                mm.setStringProperty("JMSXGroupID", "g1"); mm.setIntProperty("JMSXGroupSeq", 3);
                p.send(mm);
                StreamMessage sm = s.createStreamMessage();
                sm.writeInt(1); sm.writeString("two"); sm.writeBoolean(false); sm.writeLong(4L);
                p.send(sm);
                String object = "a serialized object";  // java.lang: trusted by the client's default
                p.send(s.createObjectMessage(object));
                StringBuilder big = new StringBuilder();
                for (int i = 0; i < 2000; i++) big.append("compressible ");
                p.send(s.createTextMessage(big.toString()));
                p.send(s.createMessage());
                MessageConsumer mc = s.createConsumer(q);
                MapMessage gm = (MapMessage) mc.receive(5000);
                check(gm.getInt("i") == 7 && gm.getLong("l") == (1L << 40) && gm.getString("s").equals("text")
                      && gm.getBoolean("b") && gm.getShort("h") == 3 && gm.getByte("y") == 2 && gm.getDouble("d") == 1.5
                      && gm.getFloat("f") == 2.5f && gm.getChar("c") == 'x' && gm.getBytes("a").length == 2, "map body");
                check("g1".equals(gm.getStringProperty("JMSXGroupID")) && gm.getIntProperty("JMSXGroupSeq") == 3, "group");
                StreamMessage gs = (StreamMessage) mc.receive(5000);
                check(gs.readInt() == 1 && gs.readString().equals("two") && !gs.readBoolean() && gs.readLong() == 4L, "stream body");
                ObjectMessage go = (ObjectMessage) mc.receive(5000);
                check(object.equals(go.getObject()), "object body");
                TextMessage gt = (TextMessage) mc.receive(5000);
                check(gt.getText().equals(big.toString()), "compressed text");
                Message gn = mc.receive(5000);
                check(gn != null && !(gn instanceof TextMessage) && !(gn instanceof BytesMessage), "no body");
                c.close();
                System.out.println("OK bodies");
                return;
            }
            case "produce-cross": {
                Connection c = connect(url, user, pass, "cid-cross");
                Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                TextMessage m = s.createTextMessage("from openwire \u00e9");
                m.setStringProperty("color", "red"); m.setJMSCorrelationID("corr-1");
                s.createProducer(s.createQueue("ow.to.stomp")).send(m);
                c.close();
                System.out.println("OK produce-cross");
                return;
            }
            case "consume-cross": {
                Connection c = connect(url, user, pass, "cid-cross2");
                Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                MessageConsumer mc = s.createConsumer(s.createQueue("ow.from.stomp"));
                Message m = mc.receive(5000);
                check(m != null, "a message from STOMP");
                String body = m instanceof TextMessage ? "text:" + ((TextMessage) m).getText()
                        : "bytes:" + ((BytesMessage) m).getBodyLength();
                c.close();
                System.out.println("OK consume-cross " + body + " " + m.getStringProperty("color"));
                return;
            }
            case "window": {
                // a producer window: without the broker's ProducerAcks the 3rd async send blocks for ever
                Connection c = connect(url + "?jms.producerWindowSize=2048", user, pass, "cid-window");
                Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                MessageProducer p = s.createProducer(s.createQueue("ow.window"));
                p.setDeliveryMode(DeliveryMode.NON_PERSISTENT);
                for (int i = 0; i < 50; i++) p.send(s.createTextMessage("w" + i));
                MessageConsumer mc = s.createConsumer(s.createQueue("ow.window"));
                int got = 0;
                while (mc.receive(1000) != null) got++;
                c.close();
                System.out.println("OK window " + got);
                return;
            }
            case "keepalive": {
                // the client fails a connection that hears nothing for 1 s: the broker's keep-alives keep it
                Connection c = connect(url + "?wireFormat.maxInactivityDuration=1000&wireFormat.maxInactivityDurationInitalDelay=500",
                                       user, pass, "cid-keepalive");
                final boolean[] failed = {false};
                c.setExceptionListener(e -> failed[0] = true);
                Thread.sleep(3500);  // the idle period under test, not a synchronisation
                Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                s.createProducer(s.createQueue("ow.keepalive")).send(s.createTextMessage("alive"));
                check(!failed[0], "no inactivity failure");
                c.close();
                System.out.println("OK keepalive");
                return;
            }
            case "selectors": {
                Connection c = connect(url, user, pass, "cid-sel");
                Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                Queue q = s.createQueue("ow.sel");
                MessageConsumer red = s.createConsumer(q, "color = 'red'");
                MessageProducer p = s.createProducer(q);
                for (String color : new String[]{"blue", "red", "green", "red"}) {
                    TextMessage m = s.createTextMessage(color); m.setStringProperty("color", color); p.send(m);
                }
                int reds = 0;
                Message m;
                while ((m = red.receive(1000)) != null) { check("red".equals(m.getStringProperty("color")), "red only"); reds++; }
                red.close();
                Topic t = s.createTopic("ow.nolocal");
                MessageConsumer local = s.createConsumer(t, null, true);
                s.createProducer(t).send(s.createTextMessage("mine"));
                check(local.receive(500) == null, "noLocal: not our own");
                Connection other = connect(url, user, pass, "cid-sel-other");
                Session os = other.createSession(false, Session.AUTO_ACKNOWLEDGE);
                os.createProducer(os.createTopic("ow.nolocal")).send(os.createTextMessage("theirs"));
                TextMessage theirs = (TextMessage) local.receive(5000);
                check(theirs != null && theirs.getText().equals("theirs"), "noLocal: another connection's");
                TemporaryQueue tq = s.createTemporaryQueue();
                os.createProducer(tq).send(os.createTextMessage("reply"));
                TextMessage reply = (TextMessage) s.createConsumer(tq).receive(5000);
                check(reply != null && reply.getText().equals("reply"), "temporary queue");
                other.close();
                c.close();
                System.out.println("OK selectors " + reds);
                return;
            }
            default: throw new IllegalArgumentException(check);
        }
    }
}
