package views

import "strconv"

// NavPacketsCap is the largest count of packets the header says exactly:
// the count of packets a user may resolve reads a bounded number of
// packets and stops one past this (proposals.WaitingPacketsCap, which a
// test keeps equal), so a larger Packets means "more than NavPacketsCap".
const NavPacketsCap = 99

// PacketsText is the packets the user may resolve as the header says
// them: "99+" past the cap.
func (n NavCounts) PacketsText() string {
	if n.Packets > NavPacketsCap {
		return strconv.Itoa(NavPacketsCap) + "+"
	}
	return strconv.Itoa(n.Packets)
}

// Badge is the header's total of what waits: cards and packets, with "+"
// when the packets passed the cap (there are at least that many).
func (n NavCounts) Badge() string {
	if n.Packets > NavPacketsCap {
		return strconv.Itoa(n.Cards+NavPacketsCap) + "+"
	}
	return strconv.Itoa(n.Cards + n.Packets)
}

// packetsWords says the packets in words: "1 packet", "99+ packets".
func packetsWords(n NavCounts) string {
	if n.Packets > NavPacketsCap {
		return n.PacketsText() + " packets"
	}
	return plural(n.Packets, "packet", "packets")
}
