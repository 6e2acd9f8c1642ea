# The recovery service (services/recovery.h): what an orphan reports once it has
# been adopted. Carried in Message's `service` envelope with id 5 and a kind below. The adoption handshake itself (Hello with `adopt`, Adopted) and the
# reports that keep every process's live tree current are the node core's
# (canopy.capnp).
@0x87a607d27ae841f2;

$import "/capnp/c++.capnp".namespace("canopy::wire::recovery");

const serviceId :UInt16 = 5;

enum Kind {
  recovered @0;                  # body: Recovered
  promoted @1;                   # body: Promoted
}

struct Recovered {
  # Orphan -> front-end (up the tree): the orphan has been adopted and has
  # compensated its lost state. Times in microseconds.
  orphan @0 :UInt32;
  adopter @1 :UInt32;
  failedParent @2 :UInt32;
  incarnation @3 :UInt32;
  chooseUs @4 :UInt64;           # computing the list of potential adopters
  connectUs @5 :UInt64;          # from the parent's loss to acceptance by the adopter
  compensateUs @6 :UInt64;       # sending filter states and held-back output
  cleanupUs @7 :UInt64;          # updating local tables and sending reports
  attempts @8 :UInt32;           # adopters tried
  incompleteStreams @9 :List(UInt32);  # streams whose filters are not state recoverable
  standby @10 :Bool;             # adopted over its standby link (no new connection)
  orphanedAtUs @11 :Int64;       # when it found its parent lost: system clock, since the epoch
}

struct Promoted {
  # The heir -> a front-end that re-attached to it, once its state has gone up: how
  # the tree outlived its front-end (docs/fault-tolerance.md, "When the front-end
  # fails"). Times in microseconds.
  heir @0 :UInt32;
  failedRoot @1 :UInt32;         # the lost front-end's rank (or the lost heir's)
  reason @2 :Text;               # how the heir found it lost
  lostAtUs @3 :Int64;            # when, on the heir's system clock, since the epoch
  promotedAfterUs @4 :UInt64;    # from then to the last process left without the
                                 # root adopted by the heir; 0: some never were
  reattachedAfterUs @5 :UInt64;  # from then to this front-end's acceptance
  adopted @6 :UInt32;            # processes the heir adopted meanwhile
  incompleteStreams @7 :List(UInt32);  # streams whose filters are not state recoverable
}
